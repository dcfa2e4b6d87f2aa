"""STAND-IN for an LLM inference server: NOT a real model. It speaks the OpenAI-compatible HTTP protocol
and the vLLM / llama-server Prometheus counters that `sparkulator bench` reads, with known ground truth,
so the benchmark can be tested on 127.0.0.1 without a GPU. Every response carries the header
`Server: sparkulator-standin (not a real LLM server)`.

Model of decoding: the prompt is "prefilled" (--prefill-delay per prompt token) and yields the first token
in one chunk; then each verification step takes --step-delay seconds and emits 1 + a tokens in ONE chunk,
where a is the number of accepted draft tokens of that step (a cycles through --accept-pattern; the first
--warmup-requests requests use --warmup-pattern instead). Counters: vllm:spec_decode_* (or llamacpp:*),
split over --engines engine labels, updated --counter-delay seconds after the last chunk while
num_requests_running stays 1. `simulate()` gives the exact ground truth.

Tokenizer: a token is a run of non-space characters with its leading spaces (regex \\s*\\S+).

Server shapes (what `bench` must cope with): by default vLLM's, whose /v1/completions takes a list of
token ids as the prompt; --no-token-prompts answers such a prompt with HTTP 400 (text prompts only),
--no-detokenize answers /detokenize with 404, --no-tokenize answers /tokenize with 404; --sglang
exposes SGLang's metrics instead (the gauges sglang:spec_accept_length / sglang:spec_accept_rate and
sglang:num_running_reqs, no counters) and puts meta_info.spec_verify_ct in the last chunk. A
non-streaming completion (bench's token-id probe) answers one token at once and is not counted
as a request for --die-after, --fail-every and friends.

For tests that check what bench sent: --record FILE appends every streaming completion request as a
JSON line {"path", "body"}; --eos-after N ends a response at "EOS" after N tokens unless the request
says ignore_eos (as a real model would stop early).
"""
import argparse
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVER_HEADER = "sparkulator-standin (not a real LLM server)"
TOKEN_RE = re.compile(r"\s*\S+|\s+$")
WORDS = ["alpha", "beta", "gamma", "d\u00e9lta", "\u2192", "\U0001F600", "eps", "zeta"]


def simulate(max_tokens, pattern, num_spec):
    """Ground truth for one request: (steps, draft_tokens, accepted, per_pos list, chunk sizes)."""
    produced, steps, drafted, accepted = 1, 0, 0, 0
    per_pos = [0] * num_spec
    chunks = [1]
    k = 0
    while produced < max_tokens:
        a = min(pattern[k % len(pattern)], num_spec, max_tokens - produced - 1)
        k += 1
        steps += 1
        drafted += num_spec
        accepted += a
        for i in range(a):
            per_pos[i] += 1
        produced += a + 1
        chunks.append(a + 1)
    return steps, drafted, accepted, per_pos, chunks


def own_rss_bytes():
    """This process's resident memory (as prometheus_client's process collector reports it)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.requests = 0
        self.running = 0
        self.engines = [dict(drafts=0, draft_tokens=0, accepted=0, per_pos=[0] * args.num_spec)
                        for _ in range(args.engines)]
        self.vocab = {}
        self.vocab_rev = []

    def token_ids(self, text):
        ids = []
        for piece in TOKEN_RE.findall(text):
            if piece not in self.vocab:
                self.vocab[piece] = len(self.vocab_rev)
                self.vocab_rev.append(piece)
            ids.append(self.vocab[piece])
        return ids


def make_handler(state):
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            sys.stderr.write("standin: " + fmt % a + "\n")

        def version_string(self):
            return SERVER_HEADER

        def send_json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                self.send_json(200, {})
            elif self.path == "/v1/models":
                self.send_json(200, {"object": "list", "data": [{"id": "standin-model", "object": "model"}]})
            elif self.path == "/version":
                self.send_json(200, {"version": "standin-1"})
            elif self.path == "/metrics":
                body = self.metrics().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_json(404, {"error": "not found"})

        def sglang_metrics(self):
            with state.lock:
                steps = sum(c["drafts"] for c in state.engines)
                accepted = sum(c["accepted"] for c in state.engines)
                running = state.running
            length = 1 + accepted / steps if steps else 0.0
            rate = accepted / (steps * args.num_spec) if steps else 0.0
            lab = 'model_name="standin-model",tp_rank="0"'
            return ("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{%s} %d\n"
                    "# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{%s} %.4f\n"
                    "# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate{%s} %.4f\n"
                    % (lab, running, lab, length, lab, rate))

        def metrics(self):
            if args.sglang:
                return self.sglang_metrics()
            p = "llamacpp:" if args.llamacpp else "vllm:"
            total = "" if args.llamacpp else "_total"
            lines = ["# TYPE process_resident_memory_bytes gauge",
                     "process_resident_memory_bytes %d" % own_rss_bytes()] + ["# HELP %snum_requests_running Requests running.\n# TYPE %snum_requests_running gauge"
                     % (p, p)]
            with state.lock:
                running_name = "llamacpp:requests_processing" if args.llamacpp else "vllm:num_requests_running"
                lines.append('%s{model_name="standin-model"} %d' % (running_name, state.running))
                if args.no_spec:
                    return "\n".join(lines) + "\n"
                for e, c in enumerate(state.engines):
                    lab = 'engine="%d",model_name="standin-model"' % e
                    lines.append("%sspec_decode_num_drafts%s{%s} %.1f" % (p, total, lab, c["drafts"]))
                    lines.append("%sspec_decode_num_drafts_created{%s} 1712345678.5" % (p, lab))
                    lines.append("%sspec_decode_num_draft_tokens%s{%s} %.1f" % (p, total, lab, c["draft_tokens"]))
                    lines.append("%sspec_decode_num_accepted_tokens%s{%s} %.1f" % (p, total, lab, c["accepted"]))
                    for i, v in enumerate(c["per_pos"]):
                        lines.append('%sspec_decode_num_accepted_tokens_per_pos%s{%s,position="%d"} %.1f'
                                     % (p, total, lab, i, v))
            return "\n".join(lines) + "\n"

        def read_body(self):
            n = int(self.headers.get("Content-Length", "0"))
            return json.loads(self.rfile.read(n) or b"{}")

        def do_POST(self):
            body = self.read_body()
            if self.path == "/tokenize":
                if args.no_tokenize:
                    return self.send_json(404, {"error": "no tokenizer"})
                text = body.get("prompt", body.get("content", ""))
                with state.lock:
                    ids = state.token_ids(text)
                return self.send_json(200, {"tokens": ids, "count": len(ids), "max_model_len": 1 << 20})
            if self.path == "/detokenize":
                if args.no_detokenize:
                    return self.send_json(404, {"error": "not found"})
                with state.lock:
                    text = "".join(state.vocab_rev[i] for i in body["tokens"])
                return self.send_json(200, {"prompt": text})
            if self.path in ("/v1/completions", "/v1/chat/completions"):
                return self.completion(body, chat=self.path.endswith("chat/completions"))
            self.send_json(404, {"error": "not found"})

        def chunk(self, data):
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        def prompt_tokens(self, body, chat):
            """The prompt's token count, or None when this server shape rejects the prompt."""
            if chat:  # every message's text content, as a chat template would join them
                prompt = "".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
            else:
                prompt = body.get("prompt", "")
            if isinstance(prompt, list):
                if args.no_token_prompts or not all(isinstance(t, int) for t in prompt):
                    return None
                return len(prompt)
            with state.lock:
                return len(state.token_ids(prompt))

        def completion(self, body, chat):
            prompt_tokens = self.prompt_tokens(body, chat)
            if prompt_tokens is None:
                return self.send_json(400, {"error": "prompt must be a string"})
            if not body.get("stream"):
                usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 1,
                         "total_tokens": prompt_tokens + 1}
                return self.send_json(200, {"choices": [{"index": 0, "text": "alpha "}], "usage": usage})
            with state.lock:
                state.requests += 1
                index = state.requests
                if args.record:
                    with open(args.record, "a") as f:
                        f.write(json.dumps({"path": self.path, "body": body}) + "\n")
            if args.die_after and index > args.die_after:
                os._exit(3)
            if args.fail_every and index % args.fail_every == 0:
                return self.send_json(503, {"error": "stand-in: injected 5xx"})
            warm = index <= args.warmup_requests
            pattern = args.warmup_pattern if warm else args.accept_pattern
            max_tokens = int(body.get("max_tokens", 16))
            if args.eos_after and not body.get("ignore_eos"):
                max_tokens = min(max_tokens, args.eos_after)
            with state.lock:
                state.running += 1
            steps, drafted, accepted, per_pos, chunks = simulate(
                max_tokens, [0] if args.no_spec else pattern, args.num_spec)
            if args.no_spec:
                chunks = [1] + [args.tokens_per_chunk] * ((max_tokens - 1) // args.tokens_per_chunk)
                rest = max_tokens - sum(chunks)
                if rest:
                    chunks.append(rest)
            try:
                self.stream(args, index, chat, prompt_tokens, max_tokens, chunks, steps)
            finally:
                self.finish_counters(args, index, steps, accepted, per_pos)

        def stream(self, args, index, chat, prompt_tokens, max_tokens, chunks, steps):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            time.sleep(args.prefill_delay * prompt_tokens)
            pending = b": stand-in keep-alive\n\n"
            burst = args.burst_every and index % args.burst_every == 0
            held = b""
            # Chunk n leaves at first + n steps: paced by the clock, not by sleeping a step after each
            # write, so the rate is the ground truth however slow a loaded machine makes a write.
            first = time.monotonic()
            for n, size in enumerate(chunks):
                time.sleep(max(0.0, first + n * args.step_delay - time.monotonic()))
                text = "".join(WORDS[(n + i) % len(WORDS)] + " " for i in range(size))
                choice = ({"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text})
                if args.token_ids:
                    choice["token_ids"] = list(range(size))
                if args.malformed_every and index % args.malformed_every == 0 and n == 2:
                    frame = b"data: {not json\n\n"
                else:
                    frame = b"data: " + json.dumps({"choices": [choice]}, ensure_ascii=False).encode() + b"\n\n"
                if args.hang_after and index > args.hang_after and n == 2:
                    time.sleep(3600)
                # Write each frame in two pieces cut at an odd byte (often inside a UTF-8 character).
                data = pending + frame
                pending = b""
                if burst and n >= 2:  # a server (or client) stalled mid-stream: the rest lands at once
                    held += data
                    continue
                cut = len(data) // 2 + 1
                self.chunk(data[:cut])
                self.chunk(data[cut:])
            if held:
                self.chunk(held)
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                     "total_tokens": prompt_tokens + max_tokens}
            last = {"choices": [], "usage": usage}
            if args.sglang:
                last["meta_info"] = {"spec_verify_ct": steps}
            self.chunk(b"data: " + json.dumps(last).encode() + b"\n\n: done soon\n")
            self.chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def finish_counters(self, args, index, steps, accepted, per_pos):
            def land():
                with state.lock:
                    if not args.no_spec:
                        for s in range(steps):  # steps alternate between engines
                            c = state.engines[s % len(state.engines)]
                            c["drafts"] += 1
                            c["draft_tokens"] += args.num_spec
                        c = state.engines[index % len(state.engines)]
                        c["accepted"] += accepted
                        for i, v in enumerate(per_pos):
                            state.engines[i % len(state.engines)]["per_pos"][i] += v
                    state.running -= 1
            if args.counter_delay > 0:
                threading.Timer(args.counter_delay, land).start()
            else:
                land()

    return Handler


def parse_args(argv=None):
    ints = lambda s: [int(x) for x in s.split(",")]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--num-spec", type=int, default=3, help="draft tokens per verification step")
    p.add_argument("--accept-pattern", type=ints, default=[2, 1, 3, 0], help="accepted per step, cycled")
    p.add_argument("--warmup-requests", type=int, default=0)
    p.add_argument("--warmup-pattern", type=ints, default=[0])
    p.add_argument("--step-delay", type=float, default=0.01, help="seconds per verification step")
    p.add_argument("--prefill-delay", type=float, default=0.0, help="seconds per prompt token")
    p.add_argument("--counter-delay", type=float, default=0.0, help="counters land this long after [DONE]")
    p.add_argument("--engines", type=int, default=1)
    p.add_argument("--llamacpp", action="store_true", help="llamacpp: counter names without _total")
    p.add_argument("--no-spec", action="store_true", help="no spec-decode counters")
    p.add_argument("--tokens-per-chunk", type=int, default=1, help="with --no-spec")
    p.add_argument("--token-ids", action="store_true", help="send token_ids in every chunk")
    p.add_argument("--no-tokenize", action="store_true")
    p.add_argument("--no-detokenize", action="store_true")
    p.add_argument("--no-token-prompts", action="store_true", help="reject token-id prompts (HTTP 400)")
    p.add_argument("--sglang", action="store_true", help="SGLang's gauges instead of counters")
    p.add_argument("--log-like-vllm", action="store_true",
                   help="print vLLM 0.32's weight-memory log lines (target 1.25, draft 0.25 GiB) at start")
    p.add_argument("--die-after", type=int, default=0, help="exit when completion request N+1 arrives")
    p.add_argument("--fail-every", type=int, default=0, help="answer 503 to every Nth completion")
    p.add_argument("--malformed-every", type=int, default=0, help="send a malformed event in every Nth")
    p.add_argument("--hang-after", type=int, default=0, help="completions after the Nth hang mid-stream")
    p.add_argument("--burst-every", type=int, default=0,
                   help="every Nth completion holds its token chunks back after the second and sends "
                        "them at once")
    p.add_argument("--record", default="", help="append every streaming completion request to this JSONL file")
    p.add_argument("--eos-after", type=int, default=0, help="end at EOS after N tokens unless ignore_eos")
    return p.parse_args(argv)


def main():
    args = parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(State(args)))
    server.daemon_threads = True
    if args.log_like_vllm:  # the formats of vllm/v1/worker/gpu_model_runner.py and weight_utils.py
        print("(Worker pid=%d) INFO [weight_utils.py:1108] Filesystem type for checkpoints: EXT4. "
              "Checkpoint size: 1.25 GiB. Available RAM: 12.00 GiB." % os.getpid())
        print("(Worker pid=%d) INFO [gpu_model_runner.py:5071] Loading drafter model..." % os.getpid())
        print("(Worker pid=%d) INFO [weight_utils.py:1108] Filesystem type for checkpoints: EXT4. "
              "Checkpoint size: 0.25 GiB. Available RAM: 12.00 GiB." % os.getpid())
        print("(Worker pid=%d) INFO [gpu_model_runner.py:5150] Model loading took 1.52 GiB memory "
              "and 1.000000 seconds" % os.getpid())
    print("standin listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
