#!/usr/bin/env bash
# Make sure the machine has what kafkalab needs outside PyPI:
#   python3 >= 3.11 with venv, graphviz (`dot`, for the labs' pictures), a
#   Java 17+ JDK (its runtime for PySpark, its javac for the Java test peer) and
#   kcat (a C Kafka client the labs and the tests point at the broker). As root
#   on Debian/Ubuntu we install what is missing with apt; otherwise we say
#   exactly which packages to install.
set -euo pipefail

PYTHON=${PYTHON:-python3}
missing=()

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    missing+=(python3)
elif ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "kafkalab needs Python 3.11 or newer; $PYTHON is $("$PYTHON" --version 2>&1)." >&2
    echo "Install a newer Python and run again with PYTHON=/path/to/python3.11 make ..." >&2
    exit 1
elif ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
# The JDK, not only the runtime: tests/integration/java_peer.py compiles the Java
# test peer (Kafka's own client) with javac.
if ! command -v java >/dev/null 2>&1 || ! java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])' \
    || ! command -v javac >/dev/null 2>&1 || ! javac -version 2>&1 | grep -Eq 'javac (1[7-9]|[2-9][0-9])'; then
    missing+=(openjdk-17-jdk-headless)
fi

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "kafkalab: installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Slim container images (debian:*-slim and the like) delete /usr/share/man, and
    # the OpenJDK packages' update-alternatives can then fail to link their man pages
    # there, which fails the whole install; an empty directory is all they need.
    mkdir -p /usr/share/man/man1
    apt-get update -qq
    # Debian 13 and newer Ubuntu ship Java 21 rather than 17; either does.
    if ! apt-get install -y -qq "${missing[@]}" >/dev/null; then
        alt=("${missing[@]/openjdk-17-jdk-headless/default-jdk-headless}")
        apt-get install -y -qq "${alt[@]}" >/dev/null
    fi
else
    echo "kafkalab needs these system packages: ${missing[*]}" >&2
    echo "Install them, e.g.:  sudo apt-get install ${missing[*]}" >&2
    echo "(or run this command as root and it installs them itself)" >&2
    exit 1
fi
