"""`locus serve`: the routing service and an OpenAI-compatible gateway (FastAPI + uvicorn).

settings.py   ServerSettings: limits, timeouts, attempts, circuit breaker
latency.py    LatencyTracker: each upstream's recent latency and error rate (max_latency_ms)
breaker.py    CircuitBreaker: LLMs that keep failing are skipped for a cool-down, then retried
upstream.py   Upstreams: one OpenAI-compatible call to an LLM's endpoint (httpx, injectable
              transport), failures classified (retryable before the first token or not)
answers.py    parse_model, ChatAnswer, StreamAnswer, GatewayError: what the gateway answers
gateway.py    Gateway: route a chat request, walk the fallback order, account the answer
streaming.py  StreamRelay: a stream's SSE lines, continued on the next LLM where it breaks
prometheus.py Metrics: Prometheus counters and histograms on the app's own registry
service_router.py  ServiceRouter: the workspace router behind the service, following the store
responses.py  the error shape, an answer's x-locus-* headers, the text a chat is routed on
requests.py   BadRequest, the JSON body and the fields every endpoint reads alike
app.py        create_app: the HTTP API (/v1/route, /v1/chat/completions, /v1/models, /health,
              /ready, /metrics), JSON errors for bad input
outcomes.py   OutcomeLog, parse_outcomes: an answer's request id, scored later, as evidence
onboard.py    LiveOnboarding: scores posted for an LLM create or refine its embedding
onboard_jobs.py  OnboardJobs: POST/GET /v1/llms/{id}/onboard, `locus onboard` in a thread
serve.py      build_app: the service from a workspace (router, endpoints, prices, gateway)
"""
