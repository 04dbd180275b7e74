#!/usr/bin/env bash
# Installs what the publication tests render with, before the tests run (they never install anything):
# - pdflatex with amsmath and lmodern (TeX Live) and poppler's pdftotext and pdffonts, from Debian or
#   Ubuntu packages (tests/test_publish.py);
# - KaTeX and MathJax 3 from npm into .test-tools/node of this checkout, or the folder
#   $ATTNCLI_NODE_TOOLS names (tests/renderers.py reads the same variable); node and npm must be present.
# - a CJK font (fonts-droid-fallback) and Chromium, from Debian packages (tests/test_png.py, the browser tests).
# Without a tool the tests that need it skip and say which tool is missing and that this script installs it.
# Measured on Debian 12: TeX Live about 75 s (apt-get update included), about 65 MB downloaded, 210 MB
# installed; KaTeX and MathJax about 20 s and 60 MB.
# Exit status: 0 when everything is installed, 1 when something could not be (the rest is still tried).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

install_tex() {
  if command -v pdflatex >/dev/null && command -v pdftotext >/dev/null && kpsewhich lmodern.sty >/dev/null 2>&1; then
    echo "install-test-tools: pdflatex, lmodern and pdftotext are already installed"
    return 0
  fi
  if ! command -v apt-get >/dev/null; then
    echo "install-test-tools: no apt-get here; install TeX Live (with amsmath and lmodern) and poppler-utils yourself" >&2
    return 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q &&
    $sudo apt-get install -y -q --no-install-recommends \
      texlive-latex-base texlive-latex-recommended texlive-fonts-recommended lmodern poppler-utils
}

install_node_packages() {
  local folder="${ATTNCLI_NODE_TOOLS:-.test-tools/node}"
  if [ -f "$folder/node_modules/katex/package.json" ] && [ -f "$folder/node_modules/mathjax-full/package.json" ]; then
    echo "install-test-tools: KaTeX and MathJax are already installed in $folder"
    return 0
  fi
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "install-test-tools: node and npm are not installed; the KaTeX and MathJax tests will skip" >&2
    return 1
  fi
  mkdir -p "$folder"
  local attempt
  for attempt in 1 2; do # the registry may fail once; a second failure is a real one
    if npm install --no-save --no-audit --no-fund --prefix "$folder" katex@0.16 mathjax-full@3; then
      echo "install-test-tools: KaTeX and MathJax installed in $folder"
      return 0
    fi
    echo "install-test-tools: npm install failed (attempt $attempt of 2)" >&2
  done
  return 1
}

install_chromium() {
  # Chromium from Debian's packages for the browser tests (tests/test_heads.py's grid, tests/test_explorer.py's page);
  # Playwright (pip, in the test environment) drives it there, with no browser download of its own.
  if command -v chromium >/dev/null; then
    echo "install-test-tools: chromium is already installed"
    return 0
  fi
  if ! command -v apt-get >/dev/null; then
    echo "install-test-tools: no apt-get here; install Chromium yourself for the browser tests" >&2
    return 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends chromium
}

install_cjk_font() {
  # A font that draws what DejaVu Sans lacks (CJK): tests/test_png.py checks that a PNG takes such characters from the
  # machine's fonts; Debian's fonts-droid-fallback, 1.8 MB.
  if command -v fc-list >/dev/null && [ -n "$(fc-list :charset=732b)" ]; then
    echo "install-test-tools: a CJK font is already installed"
    return 0
  fi
  if ! command -v apt-get >/dev/null; then
    echo "install-test-tools: no apt-get here; install a CJK font yourself for the PNG fallback test" >&2
    return 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends fonts-droid-fallback
}

install_tex || status=1
install_node_packages || status=1
install_chromium || status=1
install_cjk_font || status=1
exit "$status"
