import sys, numpy as np
from geoplan.generators import paper_mix
from geoplan.instance import Instance
from geoplan.batch import BatchEvaluator
from bench.throughput import sample_population
inst = Instance.from_dict(paper_mix(64, 48, 0, lam=0.5))
ev = BatchEvaluator(inst)
rng = np.random.default_rng(0)
pops = [sample_population(rng, 64, 48, 256) for _ in range(8)]
ev.evaluate(pops[0])
if sys.argv[1] == "run":
    for _ in range(int(sys.argv[2])):
        for p in pops: ev.evaluate(p)
if sys.argv[1] == "time":
    import time
    best = 1e9
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        for _ in range(20):
            for p in pops: ev.evaluate(p)
        best = min(best, time.perf_counter() - t)
    print(f"{20*8*256/best/1e6:.3f}")
