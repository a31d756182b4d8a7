"""Configuration: where pisces' files are (paths), what they say (settings, auth, models), which projects may
configure themselves (trust), and the lock that keeps two writers of one file apart (file_lock)."""
