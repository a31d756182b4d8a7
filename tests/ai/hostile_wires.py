"""The four provider wires, reduced to what a hostile-server test needs: a model pointing at the scripted server
and the raw SSE text of a reply's opening, of one text delta (possibly sent in pieces), of its close, and of a
reply holding one tool call whose arguments are given as raw JSON text (so that it may hold ``NaN``).

Every piece is a ``str`` ready for ``Reply(chunks=...)``: a hostile test interleaves them with stalls,
endless generators and oversized lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from pisces.ai.types import Model, ModelCost
from scripted_server import Reply

SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}


def sse(obj: dict, named: bool = False) -> str:
    prefix = f"event: {obj['type']}\n" if named else ""
    return f"{prefix}data: {json.dumps(obj)}\n\n"


@dataclass
class Wire:
    api: str
    model: Callable[[str], Model]          # server url -> model
    opening: Callable[[], list[str]]       # up to the first text delta
    delta_head: Callable[[], str]          # a text delta's SSE text up to the text's first character...
    delta_tail: str                        # ...and from the text's closing quote on
    closing: Callable[[], list[str]]       # the end of a text reply
    tool_reply: Callable[[str], list[str]]  # a reply with one tool call ``bash`` whose arguments are this text

    def delta(self, text: str) -> str:
        return self.delta_head() + json.dumps(text)[1:-1] + self.delta_tail

    def text_reply(self, *pieces: str) -> Reply:
        return Reply(200, dict(SSE_HEADERS), [*self.opening(), *[self.delta(p) for p in pieces], *self.closing()])


def _model(api: str, provider: str, mid: str, base: Callable[[str], str]) -> Callable[[str], Model]:
    def make(url: str) -> Model:
        return Model(id=mid, name=mid, api=api, provider=provider, baseUrl=base(url), reasoning=False,
                     input=["text"], cost=ModelCost(input=1, output=2, cacheRead=0, cacheWrite=0),
                     contextWindow=128000, maxTokens=1_000_000)  # the byte caps are what these wires test
    return make


# -- openai-completions ---------------------------------------------------------------------------------------
def _cc(delta: dict | None = None, finish: str | None = None) -> str:
    return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]})


OPENAI_COMPLETIONS = Wire(
    api="openai-completions",
    model=_model("openai-completions", "scripted", "m", lambda url: url + "/v1"),
    opening=lambda: [_cc({"role": "assistant", "content": ""})],
    delta_head=lambda: 'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m",'
                       '"choices":[{"index":0,"delta":{"content":"',
    delta_tail='"},"finish_reason":null}]}\n\n',
    closing=lambda: [_cc(finish="stop"), "data: [DONE]\n\n"],
    tool_reply=lambda args: [_cc({"role": "assistant", "content": None}), _cc({"tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "bash", "arguments": args}}]}),
        _cc(finish="tool_calls"), "data: [DONE]\n\n"],
)


# -- openai-responses -----------------------------------------------------------------------------------------
def _resp(obj: dict) -> str:
    return sse(obj, named=True)


def _completed() -> str:
    return _resp({"type": "response.completed", "response": {
        "id": "resp_1", "object": "response", "status": "completed",
        "usage": {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 7}}})


def _responses_tool(args: str) -> list[str]:
    item = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "bash", "arguments": ""}
    return [_resp({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
            _resp({"type": "response.output_item.added", "output_index": 0, "item": item}),
            _resp({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
                   "delta": args}),
            _resp({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0,
                   "arguments": args}),
            _resp({"type": "response.output_item.done", "output_index": 0,
                   "item": {**item, "status": "completed", "arguments": args}}),
            _completed()]


OPENAI_RESPONSES = Wire(
    api="openai-responses",
    model=_model("openai-responses", "openai", "gpt-test", lambda url: url + "/v1"),
    opening=lambda: [
        _resp({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        _resp({"type": "response.output_item.added", "output_index": 0,
               "item": {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant",
                        "content": []}}),
        _resp({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}})],
    delta_head=lambda: 'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                       '"item_id":"msg_1","output_index":0,"content_index":0,"delta":"',
    delta_tail='"}\n\n',
    closing=lambda: [_completed()],
    tool_reply=_responses_tool,
)


# -- anthropic-messages ---------------------------------------------------------------------------------------
def _ant(obj: dict) -> str:
    return sse(obj, named=True)


_MSG_START = {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [], "stop_reason": None,
    "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}}


def _ant_end(reason: str) -> list[str]:
    return [_ant({"type": "content_block_stop", "index": 0}),
            _ant({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
                  "usage": {"output_tokens": 2}}),
            _ant({"type": "message_stop"})]


ANTHROPIC = Wire(
    api="anthropic-messages",
    model=_model("anthropic-messages", "scripted-anthropic", "claude", lambda url: url),
    opening=lambda: [_ant(_MSG_START),
                     _ant({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})],
    delta_head=lambda: 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                       '"delta":{"type":"text_delta","text":"',
    delta_tail='"}}\n\n',
    closing=lambda: _ant_end("end_turn"),
    tool_reply=lambda args: [
        _ant(_MSG_START),
        _ant({"type": "content_block_start", "index": 0,
              "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}}),
        _ant({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": args}}),
        *_ant_end("tool_use")],
)


# -- google-generative-ai -------------------------------------------------------------------------------------
def _gem(parts_json: str, finish: str | None = None) -> str:
    tail = f',"finishReason":"{finish}"' if finish else ""
    usage = ',"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"totalTokenCount":7}' if finish else ""
    return (f'data: {{"candidates":[{{"content":{{"role":"model","parts":{parts_json}}},"index":0{tail}}}],'
            f'"responseId":"r1","modelVersion":"gemini-2.5-flash"{usage}}}\n\n')


GOOGLE = Wire(
    api="google-generative-ai",
    model=_model("google-generative-ai", "google", "gemini-2.5-flash", lambda url: url + "/v1beta"),
    opening=lambda: [],
    delta_head=lambda: 'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"',
    delta_tail='"}]},"index":0}],"responseId":"r1","modelVersion":"gemini-2.5-flash"}\n\n',
    closing=lambda: [_gem('[{"text":""}]', finish="STOP")],
    # the arguments are an object inside the chunk's JSON, so NaN arrives as a bare literal
    tool_reply=lambda args: [_gem('[{"functionCall":{"name":"bash","args":' + args + '}}]', finish="STOP")],
)

WIRES = {w.api: w for w in (OPENAI_COMPLETIONS, OPENAI_RESPONSES, ANTHROPIC, GOOGLE)}
