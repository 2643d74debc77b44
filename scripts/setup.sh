#!/usr/bin/env bash
# Installs what building and testing Lockstep needs on a Debian 12 machine, as root: MariaDB
# 10.11 with Galera 4 (the reference provider), sysbench, rsync and mariadb-backup (the SST
# methods of MariaDB's scripts; mtr's mariabackup tests need the latter), MariaDB's mtr suites,
# openssl (the certificates of `lockstep cluster up`), python3 (licence check), PyMySQL (the
# read-after-write client of bench/commit-path.sh) and prometheus-mysqld-exporter (the monitoring
# test). Idempotent; quick when everything is present.
set -euo pipefail

packages=(mariadb-server mariadb-client mariadb-backup galera-4 sysbench rsync mariadb-test mariadb-test-data openssl python3-pymysql prometheus-mysqld-exporter iptables)
command -v python3 >/dev/null || packages+=(python3)

missing=()
for package in "${packages[@]}"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null)" != "install ok installed" ]]; then
        missing+=("$package")
    fi
done

if ((${#missing[@]} > 0)); then
    echo "setup: installing ${missing[*]}"
    # Keep the packages' scripts from starting a system mariadbd on port 3306: our nodes are
    # the only servers on this machine.
    policy=/usr/sbin/policy-rc.d
    created_policy=false
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        created_policy=true
    fi
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
    if $created_policy; then
        rm -f "$policy"
    fi
fi

# Whatever installed them, no system server or exporter may be left running or enabled.
for service in mariadb prometheus-mysqld-exporter; do
    if [[ -d /run/systemd/system ]] && systemctl is-enabled --quiet "$service" 2>/dev/null; then
        systemctl disable --now "$service"
    fi
done
system_pid_file=/run/mysqld/mysqld.pid
if [[ -s $system_pid_file ]] && kill -0 "$(cat "$system_pid_file")" 2>/dev/null; then
    echo "setup: stopping the system mariadbd"
    /etc/init.d/mariadb stop
fi

if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found: install a Rust toolchain (rustup, stable) first" >&2
    exit 1
fi
echo "setup: $(cargo --version), mariadbd $(mariadbd --version | awk '{print $3}'), galera $(dpkg-query -W -f='${Version}' galera-4)"
