"""The bundled benchmark suite: task files (tasks/), hand-written seed candidates (seeds/)
and suite definitions (suites/). These files are data: read them by path, never import them."""
