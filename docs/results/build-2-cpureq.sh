#!/bin/bash
# usage: cpureq.sh BINARY PORT VARIANT -> CPU ms per request of the instances + load
bin=$1; port=$2; v=${3:-lua}
$bin up --port $port --instances 2 > /tmp/up-$port.log 2>&1 &
up=$!
for i in $(seq 60); do grep -q "admin token" /tmp/up-$port.log && break; sleep 0.5; done
tok=$(grep -o "admin token: .*" /tmp/up-$port.log | cut -d' ' -f3)
pids=$(grep -o "instance [ab]: pid [0-9]*" /tmp/up-$port.log | awk '{print $4}')
cpu() { local t=0; for p in $pids; do s=($(cut -d' ' -f14,15 /proc/$p/stat)); t=$((t+s[0]+s[1])); done; echo $t; }
c0=$(cpu)
/usr/bin/time -f "%U %S" -o /tmp/loadtime-$port $bin load --target http://127.0.0.1:$port --variant $v --duration 10s --stock 10000000 --admin-token $tok > /tmp/load-$port.out 2>&1
c1=$(cpu)
req=$(awk -v v=$v '$1==v{print $2}' /tmp/load-$port.out | tail -1)
lt=$(cat /tmp/loadtime-$port)
echo "$bin $v: requests $req, instances CPU $(( (c1-c0)*10 )) ms, per request $(python3 -c "print(round(($c1-$c0)*10000/$req,1))") us; load CPU (user sys) $lt"
kill $up; wait $up 2>/dev/null
