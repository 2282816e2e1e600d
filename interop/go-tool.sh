# Sourced by the interop scripts.
# go_tool BIN PKG VERSION: `go install PKG@VERSION` into BIN, unless the binary
# there already reports exactly that module version (so reruns are fast).
go_tool() {
  local bin=$1 pkg=$2 version=$3 name
  name=$(basename "$pkg")
  if [[ -x $bin/$name ]] && go version -m "$bin/$name" 2>/dev/null | awk '$1 == "mod" { print $3 }' | grep -qx "$version"; then
    return 0
  fi
  GOBIN=$bin go install "$pkg@$version"
}
