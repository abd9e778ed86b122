"""`locus serve`: the routing service and an OpenAI-compatible gateway (FastAPI + uvicorn).

settings.py        ServerSettings: limits, timeouts, attempts, retries, circuit breaker
upstream.py        Upstreams: one OpenAI-compatible call to an LLM's endpoint (httpx,
                   injectable transport); re-exports upstream_failures'
upstream_failures.py  a failure typed (`Failure`, `UpstreamError`), a failed try (`Attempt`)
health.py          CircuitBreaker (LLMs that keep failing skipped for a cool-down) and
                   LatencyTracker (each upstream's recent latency and error rate)
metrics.py         Metrics: Prometheus counters and histograms on the app's own registry
service_router.py  what the service asks the router: ServiceRouter (following the store),
                   parse_model (the model name's decision rule), POST /v1/route
fallback.py        FallbackWalk: one request down its fallback order (retries, breaker,
                   retirement, attempts), GatewayError
gateway.py         Gateway: the fallback order, a chat answer or a stream, accounted
streaming.py       StreamRelay: a stream's SSE lines, continued on the next LLM where it breaks
http_io.py         the HTTP edge: API keys, bodies checked (BadRequest), the one error shape,
                   the x-locus-* headers
onboarding.py      scores posted, outcomes of answers (and the onboarding routes)
decisions.py       DecisionLog: each answered chat request kept in the store's decision log
canary_watch.py    CanaryWatch: the canary checks on a schedule, their alarms
status_routes.py   /health, /ready, /v1/upstreams, /metrics, /v1/models, catalog reload
onboard_jobs.py    OnboardJobs: an endpoint onboarded in a background job
app.py             create_app (the endpoints, by concern) and build_app (from a workspace)
"""
