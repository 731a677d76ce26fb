#!/usr/bin/env sh
# Debian packages the packet needs: Pango and HarfBuzz for WeasyPrint's PDF writer (the subset
# library halves PDF writing time), and DejaVu fonts, which both the charts and the PDF use.
# Installs only what is missing, so on a prepared machine this is a no-op.
set -eu
packages="libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-dejavu-core"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "reviewkit needs these Debian packages:$missing; install them with: sudo apt-get install$missing" >&2
  exit 1
fi
echo "installing:$missing" >&2
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
