#!/usr/bin/env bash
# One command for every figure the README quotes: writes report.md and report.json (default
# build/report/). bench/report.py --help lists the sections and options; --quick is the subset
# meant for about 10 minutes. Run bash bench/setup.sh first for the PyTorch side.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/report.py" "$@"
