"""Protocol: in, a test cell's source (from the gradebook) and a connection to the student's kernel; out, a
verdict decided in the grader. The kernel side (`probe`) answers requests with plain data on the wire
(`wire`); the grader side (`remote`, `trusted`) turns the student's names into proxies and never executes
or unpickles what the kernel sends."""
