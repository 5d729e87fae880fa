"""Run: in, the staged submissions of a class; out, their grades in the gradebook, the autograded notebooks in
`autograded/`, a record per submission and an `Outcome` each. nbgrader's Autograde converter drives it; the
execute step runs the student's cells in a sandboxed kernel and judges the test cells through the protocol;
review flags and forbidden shortcuts are read from the student's code; a failed test is matched against the
catalog's misconceptions (diagnosis.py) and the likely one named in its message and the record. The execute
step runs in an executor process per job (executors.py), or, with a Dask cluster (cluster.py), on its workers;
everything else stays here."""
