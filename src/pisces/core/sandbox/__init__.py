"""Confinement of what pisces runs on the model's behalf: ``policy`` (which sandbox a command gets: the mode,
the network, the writable roots), ``launch`` (the one launcher: a session's ``Sandbox`` applies the policy to a
child process), ``landlock`` (the kernel's Landlock through ctypes) and ``gitsafe`` (every git command pisces
runs itself ignores the repository's configured programs). Importing this package loads nothing else."""
