"""`locus serve`: the routing service and an OpenAI-compatible gateway (FastAPI + uvicorn).

settings.py   ServerSettings: limits, timeouts, attempts, circuit breaker
latency.py    LatencyTracker: each upstream's recent latency and error rate (max_latency_ms)
breaker.py    CircuitBreaker: LLMs that keep failing are skipped for a cool-down, then retried
upstream.py   Upstreams: one OpenAI-compatible call to an LLM's endpoint (httpx, injectable
              transport), failures classified (retryable before the first token or not)
gateway.py    Gateway: route a chat request, walk the fallback order, account the answer
prometheus.py Metrics: Prometheus counters and histograms on the app's own registry
app.py        create_app: the HTTP API (/v1/route, /v1/chat/completions, /v1/models, /health,
              /ready, /metrics), JSON errors for bad input
outcomes.py   OutcomeLog, parse_outcomes: an answer's request id, scored later, as evidence
onboard.py    LiveOnboarding: scores posted for an LLM create or refine its embedding
serve.py      build_app: the service from a workspace (router, endpoints, prices, gateway)
"""
