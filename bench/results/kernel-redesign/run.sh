#!/bin/bash
# Kernel redesign: before (67293c2) vs after (HEAD), alternated in one session.
cd /work/main
. .venv/bin/activate
echo "# $(date -u +%FT%TZ)  before=67293c2 after=$(git rev-parse --short HEAD)"
PYTHONPATH=/tmp/before python -m bench.throughput --quick --json >/dev/null 2>&1
python -m bench.throughput --quick --json >/dev/null 2>&1
for k in 1 2 3; do
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo -n "before throughput: "; (cd /tmp && PYTHONPATH=/tmp/before python -m bench.throughput --runs 5 --json)
  echo -n "after throughput: "; (cd /tmp && python -m bench.throughput --runs 5 --json)
done
for k in 1 2; do
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "before exact_bench:"; (cd /tmp && PYTHONPATH=/tmp/before python -m bench.exact_bench --quick --no-warm --threads 1 --seed 0 2>&1 | tail -25)
  echo "after exact_bench:"; (cd /tmp && python -m bench.exact_bench --quick --no-warm --threads 1 --seed 0 2>&1 | tail -25)
done
echo "# end $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
