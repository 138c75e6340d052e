// Package anthropicapi is the Anthropic Messages surface of iop-edge
// (POST /v1/messages, /v1/messages/count_tokens, GET /v1/models in
// Anthropic's shape). It is a translating front over the OpenAI chat
// pipeline: the edge parses a Messages request (ParseRequest), turns it into
// an OpenAI chat completions body (Request.OpenAIChat), runs that through the
// unchanged pipeline, and turns the OpenAI answer back into a Messages
// response (RenderMessage) or Messages SSE events (StreamWriter). Errors use
// Anthropic's envelope (WriteError, FromOpenAIError).
//
// Request mapping (Messages → OpenAI chat):
//
//	model                       model, as is
//	max_tokens                  max_tokens
//	system (string | text[])    a leading system message; blocks joined by "\n\n"
//	user text / image blocks    user message content: a string for one text
//	                            block, else parts (text; image_url with a
//	                            data: URL for base64, the URL for url)
//	user tool_result blocks     role "tool" messages (tool_call_id, text joined
//	                            by "\n"; is_error prefixes "Error: "), placed
//	                            before the turn's user message; images in a
//	                            tool result move to that user message
//	assistant text blocks       assistant content, concatenated
//	assistant tool_use blocks   assistant tool_calls (arguments = compact JSON
//	                            of input)
//	assistant thinking blocks   assistant reasoning (their thinking text,
//	                            concatenated), on a turn with text or
//	                            tool_use, or on a middle turn whose text is
//	                            empty (then with content ""); redacted_thinking
//	                            dropped; on a tunnel (TunnelChat) under the
//	                            member its server reads: reasoning (vLLM),
//	                            reasoning_content (llama.cpp), or none (any
//	                            other server; the empty turn goes with it)
//	tools                       {"type":"function","function":{name,
//	                            description,parameters:input_schema}}
//	tools[].strict true         function.strict: true (false: omitted)
//	tool_choice auto|any|tool|none
//	                            "auto" | "required" | {"type":"function",
//	                            "function":{"name"}} | "none"
//	disable_parallel_tool_use   parallel_tool_calls: false
//	stop_sequences              stop
//	temperature, top_p          temperature, top_p (Anthropic's 0..1 range
//	                            is enforced; the value goes as is)
//	top_k                       top_k (vLLM extension; omitted when 0)
//	metadata.user_id            user
//	stream                      stream: true, stream_options.include_usage
//	thinking                    not in the chat body; type (required)
//	                            "enabled", "adaptive" or "between_tools"
//	                            turns the answer's reasoning into thinking
//	                            blocks, with empty text for display
//	                            "omitted" ("updates" only under its
//	                            anthropic-beta, ThinkingDisplayUpdatesBeta,
//	                            then as "omitted");
//	                            budget_tokens is checked for its type only
//	                            and reaches no backend; type "disabled" is
//	                            Request.ThinkingOff, which the edge sends to
//	                            a run on a provider that is not
//	                            OpenAI-compatible as reasoning_effort "none",
//	                            and to vLLM and llama.cpp (run or tunnel) as
//	                            chat_template_kwargs {"enable_thinking":
//	                            false} (WithTemplateThinkingOff); any other
//	                            type is refused (400)
//	output_config.effort        reasoning_effort: low, medium, xhigh as they
//	                            are, max as "xhigh", high (Anthropic's
//	                            default) as nothing; nothing when thinking
//	                            is "disabled"; any other value is refused
//	                            (400)
//	output_config.format        response_format {"type":"json_schema",
//	(or the deprecated          "json_schema":{name,schema,"strict":true}};
//	output_format)              name: the schema's title when it matches
//	                            ^[a-zA-Z0-9_-]{1,64}$, else "response"; type
//	                            must be "json_schema" and schema an object
//	                            (else 400); output_config.format wins when
//	                            both are given
//
// Response mapping (OpenAI → Messages):
//
//	message.reasoning (or       a thinking block first, with an empty
//	reasoning_content)          signature, when the request enabled
//	                            thinking (its text empty for display
//	                            "omitted"); else dropped
//	message.content             a text block (when not empty)
//	message.tool_calls          tool_use blocks (id = call id; input = the
//	                            arguments when they are a JSON object, else {})
//	finish_reason stop          end_turn, or stop_sequence when vLLM's
//	                            stop_reason is one of the request's stop
//	                            sequences (stop_sequence = that string)
//	finish_reason length        max_tokens
//	tool_calls | function_call  tool_use (end_turn when no call came)
//	content_filter              refusal
//	usage prompt/completion     usage input_tokens/output_tokens (the edge's
//	                            estimates when the upstream reports none)
//
// Like openaiapi, the package is pure: no HTTP server, no dispatch, no
// logging, and it keeps no request content beyond the values it returns.
package anthropicapi
