"""Confinement of what pisces runs on the model's behalf: ``gitsafe`` (every git command pisces runs itself
ignores the repository's configured programs). Importing this package loads nothing else."""
