"""pisces benchmarks: one runner, one module per workload.

    python -m benchmarks [--quick] [--json OUT] [--no-pi] [--rounds N] [--only rpc,sessions,...]

prints a table (figure, pisces, pi, pisces/pi) and writes every raw sample, the date and the machine to
JSON (``benchmarks/results/`` unless ``--json``). Where node is present it installs pi 0.73.1 with
``../shared/conformance/install_pi.sh`` and runs it on the same workloads through its RPC mode, alternating
runs. The modules also run alone (``python -m benchmarks.bench_rpc`` ...). Nothing here asserts a timing.
"""
