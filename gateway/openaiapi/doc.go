// Package openaiapi is the OpenAI-shaped layer of iop-edge: it parses and
// validates the request bodies of the public /v1 endpoints, rewrites the
// external `model` for the upstream without disturbing any other byte, and
// renders the normalized RunEvents a node sends back as OpenAI responses
// (chat.completion, chat.completion.chunk SSE, text_completion, embeddings,
// model lists) and OpenAI error envelopes.
//
// It is deliberately pure: no HTTP server, no dispatch, no logging. The edge's
// handlers read the body, call Parse*, route, and feed the run's events to an
// aggregator (non-stream) or a stream writer (SSE). Every failure that should
// reach the API caller is an *Error carrying its HTTP status and OpenAI
// envelope; test for a class of failure with errors.Is and the Err* sentinels.
//
// Nothing here logs or retains request content beyond the value it returns,
// so prompts and secrets cannot leak through this package.
package openaiapi
