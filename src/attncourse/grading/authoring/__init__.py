"""Authoring: in, a unit's source notebook and catalog (`catalog/<a>.py`); out, submissions made from them (the
reference, the lecturer's and the deck's code, catalogued mistakes), the demo class and `course build`'s demo
course, a new unit's skeleton, the author's quick check through the real grading path, and a Dask cluster on this
machine (local_cluster.py) for trying `course grade --cluster`."""
