"""Confinement of what pisces runs on the model's behalf: ``gitsafe`` (every git command pisces runs itself
ignores the repository's configured programs, in use by the task tool) and ``landlock`` (a Landlock ruleset
for a child process, tested against the kernel but not yet applied to any command). Importing this package
loads nothing else."""
