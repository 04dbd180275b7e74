#!/usr/bin/env bash
# Installs what the publication tests (tests/test_publish.py) render with: pdflatex with amsmath
# and lmodern (TeX Live) and poppler's pdftotext and pdffonts, from Debian or Ubuntu packages.
# KaTeX and MathJax come from npm: the tests install them into .pytest_cache on first use (node
# and npm must be present). Without these tools those tests skip and say which tool is missing.
# Measured on Debian 12: about 75 s (apt-get update included), about 65 MB downloaded, 210 MB installed.
set -euo pipefail

if command -v pdflatex >/dev/null && command -v pdftotext >/dev/null && kpsewhich lmodern.sty >/dev/null 2>&1; then
  echo "install-test-tools: pdflatex, lmodern and pdftotext are already installed"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-test-tools: no apt-get here; install TeX Live (with amsmath and lmodern) and poppler-utils yourself" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends \
  texlive-latex-base texlive-latex-recommended texlive-fonts-recommended lmodern poppler-utils
