#!/usr/bin/env bash
# The Python bindings' pytest suite against a build's libtrit.so and trit binary (ctest
# python_bindings, tools/test.sh). Exits 77 (skipped) with a message when PYTHON lacks numpy or
# pytest (Debian: python3-numpy python3-pytest, tools/setup.sh installs them).
#   run_pytest.sh PYTHON LIBTRIT_SO TRIT_BINARY SOURCE_DIR
set -euo pipefail
py=$1 so=$2 cli=$3 src=$4
if ! "$py" -c "import numpy, pytest" 2>/dev/null; then
  echo "python bindings: skipped: $py has no numpy or pytest (apt-get install python3-numpy python3-pytest)"
  exit 77
fi
export TRIT_LIBRARY=$so TRIT_CLI=$cli TRIT_SOURCE_DIR=$src PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
cd "$src/python"
exec "$py" -m pytest -q -p no:cacheprovider tests
