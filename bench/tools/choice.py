"""Does the model call a tool when it should, and answer in text when it should not?

`python3 bench/tools/choice.py URL [--model M] [--runs N] [--temperature T]` sends each case
below to `URL/v1/chat/completions` with its tools and `tool_choice: auto` (the OpenAI
client's default), and counts calls and text answers. Positive cases need a tool (the
request is what the tool does); negative ones do not (small talk, writing, facts no tool
offers). A call must name an offered function; its arguments are the server's business
(generated under the parameters' grammar), so they are not scored here.

The cases were written for this benchmark and never used to tune the tool prompt (which
was chosen on other requests, see `formwork_engine::tool_prompt`).
"""
import argparse
import json
import sys
import urllib.request

WEATHER = {"name": "get_weather", "description": "Get the current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
EMAIL = {"name": "send_email", "description": "Send an email.",
         "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                                                          "body": {"type": "string"}}, "required": ["to", "subject", "body"]}}
STOCK = {"name": "get_stock_price", "description": "Get the latest price of a stock by its ticker symbol.",
         "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]}}
TIMER = {"name": "set_timer", "description": "Start a countdown timer.",
         "parameters": {"type": "object", "properties": {"minutes": {"type": "integer", "minimum": 1}}, "required": ["minutes"]}}
SEARCH = {"name": "search_products", "description": "Search the shop's catalogue.",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "max_price": {"type": "number"}},
                         "required": ["query"]}}
CONVERT = {"name": "convert_currency", "description": "Convert an amount between currencies.",
           "parameters": {"type": "object", "properties": {"amount": {"type": "number"}, "from": {"type": "string"},
                                                            "to": {"type": "string"}}, "required": ["amount", "from", "to"]}}

# (tools, user message, should call)
CASES = [
    ([WEATHER], "Do I need an umbrella in London today?", True),
    ([WEATHER, TIMER], "How hot is it in Cairo right now?", True),
    ([EMAIL], "Email bob@example.com to tell him the meeting moved to 3pm.", True),
    ([STOCK], "What is Apple's share price at the moment?", True),
    ([STOCK, WEATHER], "Check the current price of TSLA for me.", True),
    ([TIMER], "Set a timer for 10 minutes.", True),
    ([TIMER, EMAIL], "Remind me in 25 minutes to take the pizza out.", True),
    ([SEARCH], "Find me running shoes under 80 dollars.", True),
    ([SEARCH, STOCK], "Do you sell blue coffee mugs?", True),
    ([CONVERT], "How much is 150 euros in US dollars?", True),
    ([WEATHER], "Thanks, that's all for today!", False),
    ([EMAIL], "Write a haiku about autumn leaves.", False),
    ([STOCK], "Who wrote Pride and Prejudice?", False),
    ([TIMER], "What is 12 times 12?", False),
    ([SEARCH], "Tell me a fun fact about octopuses.", False),
    ([CONVERT], "Good morning! How are you?", False),
    ([WEATHER, EMAIL], "Translate 'thank you' into Spanish.", False),
    ([STOCK, TIMER], "Explain what a noun is in one sentence.", False),
    ([SEARCH, WEATHER], "What is the capital of Japan?", False),
    ([CONVERT, SEARCH], "Give me a synonym for 'happy'.", False),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--runs", type=int, default=1, help="runs per case (seeds 0..N-1)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("-v", action="store_true", help="print every reply")
    a = ap.parse_args()
    counts = {True: [0, 0], False: [0, 0]}  # should-call -> [called, answered in text]
    bad = 0
    for tools, user, should in CASES:
        for seed in range(a.runs):
            body = {"model": a.model, "messages": [{"role": "user", "content": user}], "max_tokens": 200,
                    "temperature": a.temperature, "seed": seed, "tool_choice": "auto",
                    "tools": [{"type": "function", "function": t} for t in tools]}
            req = urllib.request.Request(a.url.rstrip("/") + "/v1/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            msg = json.load(urllib.request.urlopen(req, timeout=600))["choices"][0]["message"]
            calls = msg.get("tool_calls") or []
            names = {t["name"] for t in tools}
            if calls and any(c["function"]["name"] not in names for c in calls):
                bad += 1
            counts[should][0 if calls else 1] += 1
            if a.v:
                what = [f'{c["function"]["name"]}({c["function"]["arguments"]})' for c in calls] or repr((msg.get("content") or "")[:80])
                print(f"{'call' if should else 'text'} wanted | {user[:50]:50s} | {what}", file=sys.stderr)
    pc, pt = counts[True]
    nc, nt = counts[False]
    print(json.dumps({"should_call": {"called": pc, "text": pt}, "should_answer": {"called": nc, "text": nt},
                      "right": pc + nt, "of": pc + pt + nc + nt, "unknown_function": bad}))


if __name__ == "__main__":
    main()
