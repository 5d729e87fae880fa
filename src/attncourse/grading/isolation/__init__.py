"""Isolation: in, the sandbox settings (`c.Sandbox.*`) and a request for a kernel; out, a kernel process forked
from a preloaded zygote, inside a bubblewrap sandbox of its own as an unprivileged uid, or the reason none can
be made here."""
