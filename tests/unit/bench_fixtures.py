"""Outputs captured from the peers bench/run drives (2026-11-25, this machine), trimmed to what
bench/compare/parsers.py reads; for tests/unit/test_bench_parsers.py."""

MUTILATE = """\
#type       avg     std     min     5th    10th    90th    95th    99th
read     3956.3  9309.7    28.1   142.1   157.6 16622.0 23530.9 43484.5
update      0.0     0.0     0.0     0.0     0.0     0.0     0.0     0.0
op_q        4.0     0.2     1.0     3.8     3.8     4.1     4.2     4.2

Total QPS = 7809.3 (15663 / 2.0s)

Misses = 15663 (100.0%)
Skipped TXs = 0 (0.0%)
"""
#: mutilate --save: "start_s latency_us" per get.
MUTILATE_SAVE = "".join(f"0.044493 {v:.6f}\n" for v in range(1, 1001))

MEMTIER_JSON = """{"ALL STATS": {"Totals": {"Count": 19235, "Ops/sec": 19169.17, "Average Latency": 0.284,
 "Percentile Latencies": {"p50.00": 0.087, "p99.00": 5.439, "p99.90": 14.399}}}}"""

WRK2 = """\
  Latency Distribution (HdrHistogram - Recorded Latency)
 50.000%    1.20ms
 75.000%    1.84ms
 90.000%    4.26ms
 99.000%    9.09ms
 99.900%   11.49ms
 99.990%   13.02ms
----------------------------------------------------------
  9808 requests in 2.00s, 4.10MB read
Requests/sec:   4901.24
"""

WRK = """\
    Latency   649.28us    0.98ms  13.48ms   89.34%
  Latency Distribution
     50%  276.00us
     75%  448.00us
     90%    1.75ms
     99%    4.49ms
  72638 requests in 2.01s, 30.34MB read
Requests/sec:  36190.05
"""

REDIS_BENCHMARK = """\
"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"GET","35087.72","0.080","0.016","0.055","0.079","0.167","6.735"
"""

H2LOAD = """\
finished in 2.00s, 4792.00 req/s, 2.00MB/s
requests: 9584 total, 9584 started, 9584 done, 9584 succeeded, 0 failed, 0 errored, 0 timeout
                     min         max         mean         sd        +/- sd
time for request:       62us     27.79ms       686us      1.80ms    95.54%
"""

#: vegeta encode --to csv (bodies left out with -max-body 0): timestamp_ns,code,latency_ns,…
VEGETA_CSV = "".join(f"{1795576965000000000 + i * 1_000_000},200,{(i + 1) * 1000},0,0,,,,{i},GET,http://x/,\n"
                     for i in range(1000)) + "1795576966000000000,0,5000,0,0,refused,,,1000,GET,http://x/,\n"

FORTIO_JSON = """{"ActualQPS": 49.38944423312896, "DurationHistogram": {"Count": 50, "Avg": 0.0038770884399999994,
 "Percentiles": [{"Percentile": 50, "Value": 0.0033333333333333335}, {"Percentile": 99, "Value": 0.0112287865},
 {"Percentile": 99.9, "Value": 0.011434694350000002}]}}"""

MEMCSLAP = """\
Time to generate       5000 test keys:                0.078 seconds.
Time to get           20000 keys by    4 threads:     1.864 seconds.
"""
