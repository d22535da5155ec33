"""A stand-in LLM judge for the calibration example: an OpenAI-compatible Chat Completions server.

It needs no network and no model. It "reads" the grader prompt the way a literal-minded model would
and follows the instruction it recognizes in it:

* "lists every region": every region named in the task must appear in the answer;
* "equals the sum": the total must equal the sum of the task's figures. Like a hasty model, it takes the
  first number after the word "total" in the answer, so an answer that states a *sub*total first is
  failed although its total is right (its one systematic error);
* otherwise: the answer must report a total.

It answers in the freeform shape evalstore's LLM grader expects, ``{"score": 1|0, "assertions": [...]}``.
Run it with ``python3 judge.py --port 8765`` and point evalstore at it with
``EVALSTORE_JUDGE_BASE_URL=http://127.0.0.1:8765/v1`` and ``EVALSTORE_JUDGE_MODEL=stand-in``; it prints
``listening on PORT`` once it is ready (``--port 0`` picks a free port). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def grade(prompt: str) -> tuple[bool, str, str]:
    """(passed, what was checked, evidence) for one rendered grader prompt."""
    task = prompt.split("Task:", 1)[1].split("Answer:", 1)[0]
    answer = prompt.split("Answer:", 1)[1]
    figures = [(name, int(v)) for name, v in re.findall(r"([A-Z][a-z]+) (\d+)", task.split(":", 1)[-1])]
    total = re.search(r"total\D*(\d+)", answer, flags=re.IGNORECASE)
    if total is None:
        return False, "reports a total", "no total in the answer"
    if "lists every region" in prompt:
        missing = [name for name, _ in figures if not re.search(rf"\b{name}\b", answer)]
        if missing:
            return False, "lists every region", f"missing: {', '.join(missing)}"
    if "equals the sum" in prompt:
        expected = sum(v for _, v in figures)
        if int(total.group(1)) != expected:
            return False, "total equals the sum", f"total {total.group(1)}, the figures add up to {expected}"
    return True, "the answer meets the instruction", f"total {total.group(1)}"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        passed, text, evidence = grade(prompt)
        content = json.dumps(
            {"score": 1.0 if passed else 0.0, "assertions": [{"text": text, "passed": passed, "evidence": evidence}]}
        )
        reply = json.dumps(
            {
                "id": "stand-in",
                "object": "chat.completion",
                "model": body.get("model", "stand-in"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": len(prompt) // 4,
                    "completion_tokens": 30,
                    "total_tokens": len(prompt) // 4 + 30,
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
