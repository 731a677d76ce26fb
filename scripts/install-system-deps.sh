#!/usr/bin/env sh
# Debian packages reviewkit needs: Pango and HarfBuzz for WeasyPrint's PDF writer (the subset
# library halves PDF writing time) and DejaVu fonts, which the charts and the PDF both use.
# With --test also what the browser tests drive: Debian's Chromium and axe-core (npm, into
# .test-deps/). Installs only what is missing, so on a prepared machine this is a no-op.
set -eu
packages="libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-dejavu-core"
if [ "${1:-}" = "--test" ]; then
  packages="$packages chromium"
fi
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "reviewkit needs these Debian packages:$missing; install them with: sudo apt-get install$missing" >&2
    exit 1
  fi
  echo "installing:$missing" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
if [ "${1:-}" = "--test" ] && [ ! -f .test-deps/node_modules/axe-core/axe.min.js ]; then
  echo "installing: axe-core (npm) into .test-deps/" >&2
  mkdir -p .test-deps
  (cd .test-deps && npm install --silent --no-audit --no-fund --no-save axe-core@4 >/dev/null)
fi
