#!/usr/bin/env bash
# `cmake --install` of this build into a temporary prefix, then a program from outside the tree
# built against the installed copy two ways (pkg-config, and find_package(trit) with the shared
# and the static library) and run; it must compute the worked example's values.
# Also checks the installed files: libtrit.so's SONAME and that it exports only trit_ names.
#   test_install.sh BUILD_DIR SOURCE_DIR C_COMPILER [EXTRA_CFLAGS]
set -euo pipefail
# (grep without -q below: -q stops reading at the first match, and the writer killed by SIGPIPE
# fails the pipeline under pipefail, now and then.)
build=$1 src=$2 cc=$3 extra=${4:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trit-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install failed"; }
prefix=$tmp/prefix
libdir=$(dirname "$(find "$prefix" -name trit.pc -path '*/pkgconfig/*' | head -n 1)")/..
libdir=$(cd "$libdir" && pwd)
for f in include/trit/trit.h include/trit/version.h bin/trit; do
  [ -e "$prefix/$f" ] || fail "missing $f after install"
done
for f in libtrit.a libtrit.so cmake/trit/trit-config.cmake cmake/trit/trit-config-version.cmake; do
  [ -e "$libdir/$f" ] || fail "missing $libdir/$f after install"
done

version=$("$prefix/bin/trit" --version) || fail "installed trit --version failed"
so=$(readlink "$libdir/libtrit.so")
soname=$(objdump -p "$libdir/libtrit.so" | awk '$1 == "SONAME" {print $2}')
case "$soname" in libtrit.so.[0-9]*) ;; *) fail "libtrit.so has SONAME '$soname', expected libtrit.so.<version>" ;; esac
[ -e "$libdir/$soname" ] || fail "no file $soname beside libtrit.so (-> $so)"
others=$(nm -D --defined-only "$libdir/libtrit.so" | awk '{print $3}' | grep -v '^trit_' | grep -v '^_init$\|^_fini$' || true)
[ -z "$others" ] || fail "libtrit.so exports names without the trit_ prefix: $(echo $others | head -c 300)"
nm -D --defined-only "$libdir/libtrit.so" | grep ' T trit_version$' >/dev/null || fail "libtrit.so does not export trit_version"

# pkg-config, shared library (found at run time through the rpath).
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion trit)" = "${version#trit }" ] || fail "pkg-config says $(pkg-config --modversion trit), trit --version says $version"
# shellcheck disable=SC2046
"$cc" -std=c11 $extra -o "$tmp/worked_pc" "$src/examples/worked_example.c" $(pkg-config --cflags --libs trit) -lm \
  -Wl,-rpath,"$libdir" || fail "building with pkg-config failed"
"$tmp/worked_pc" >"$tmp/worked_pc.out" || { cat "$tmp/worked_pc.out"; fail "the pkg-config build's worked example failed"; }
ldd "$tmp/worked_pc" | grep "$libdir/$soname" >/dev/null || fail "the pkg-config build does not load $libdir/$soname"

# find_package(trit): shared and static.
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$extra" \
  -DCMAKE_PREFIX_PATH="$prefix" -DTRIT_EXAMPLE="$src/examples/worked_example.c" >"$tmp/configure.log" 2>&1 \
  || { cat "$tmp/configure.log"; fail "configuring the find_package(trit) consumer failed"; }
cmake --build "$tmp/consumer" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "building the find_package(trit) consumer failed"; }
for p in worked_shared worked_static version_check; do
  "$tmp/consumer/$p" >"$tmp/$p.out" 2>&1 || { cat "$tmp/$p.out"; fail "$p (find_package build) failed"; }
done
ldd "$tmp/consumer/worked_shared" | grep "$libdir/$soname" >/dev/null || fail "worked_shared does not load $libdir/$soname"
if ldd "$tmp/consumer/worked_static" | grep libtrit >/dev/null; then fail "worked_static loads libtrit.so"; fi
cmp -s "$tmp/worked_pc.out" "$tmp/worked_shared.out" || fail "the two builds print different results"
grep -qx "$version" "$tmp/version_check.out" || fail "version_check printed '$(cat "$tmp/version_check.out")', trit --version '$version'"
echo "test_install: $version, $soname, pkg-config and find_package(trit) builds pass"
