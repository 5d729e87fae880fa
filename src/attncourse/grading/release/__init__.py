"""Release: in, an assignment's source notebooks; out, the student version in `release/<a>/` (nbgrader's
generate_assignment, refused if a solution or hidden test leaks), its tests stored in the gradebook, a
checksum record in `released.json`, and the student hand-out `build/student/<a>.zip`."""
