"""Small helpers several layers use (the GC pause, text/HTML tables); imports nothing else
of the package."""
