/*
 * err.h: the closed set of outcomes weir's functions return.
 *
 * Principle: a function returns 0 when it did its work, WEIR_EAGAIN when it
 * must wait for the next event (re-arm the watcher and return to the loop),
 * and another negative code from the table below when it failed. Each entry
 * carries the HTTP status weir answers with (0 when it answers nothing, the
 * connection is just closed), the name of the counter that counts it in the
 * shared segment, and the sentence that goes to the error log. One table, so
 * the three can never drift apart.
 */
#ifndef WEIR_COMMON_ERR_H
#define WEIR_COMMON_ERR_H

/*  name                  status  counter name            log sentence */
#define WEIR_ERR_TABLE(X)                                                           \
	X(AGAIN, 0, "again", "operation would block")                                    \
	X(NOMEM, 503, "no_memory", "out of buffer memory")                               \
	X(CONN_LIMIT, 0, "connection_limit", "worker connection limit reached")          \
	X(BAD_REQUEST, 400, "bad_request", "malformed request")                         \
	X(SMUGGLING, 400, "bad_framing", "ambiguous or invalid message framing")        \
	X(CONNECTION_TOKENS, 400, "connection_tokens", "too many Connection header tokens") \
	X(NO_ROUTE, 404, "no_route", "no route for host and path")                      \
	X(HEADER_TIMEOUT, 408, "header_timeout", "request head not received in time")   \
	X(BODY_TIMEOUT, 408, "body_timeout", "request body not received in time")       \
	X(BODY_TOO_LARGE, 413, "body_too_large", "request body too large")              \
	X(URI_TOO_LONG, 414, "uri_too_long", "request target too long")                 \
	X(HEADERS_TOO_LARGE, 431, "headers_too_large", "request headers too large")     \
	X(UPSTREAM_REFUSED, 502, "upstream_refused", "upstream refused the connection") \
	X(UPSTREAM_CLOSED, 502, "upstream_closed", "upstream closed the connection early") \
	X(UPSTREAM_BAD_RESPONSE, 502, "upstream_bad_response", "upstream sent an invalid response") \
	X(NO_SERVER, 503, "no_server", "no upstream server available")                  \
	X(UPSTREAM_TIMEOUT, 504, "upstream_timeout", "upstream did not answer in time") \
	X(CLIENT_CLOSED, 0, "client_closed", "client closed the connection mid-request") \
	X(CLIENT_TIMEOUT, 0, "client_timeout", "client stopped reading or sending")     \
	X(RESPONSE_CUT, 0, "response_cut", "response cut short after it had started")   \
	X(DRAIN_CUT, 0, "drain_cut", "connection cut by the drain timeout")             \
	X(TLS_HANDSHAKE, 0, "tls_handshake", "TLS handshake failed")                    \
	X(UPSTREAM_TLS, 502, "upstream_tls", "TLS handshake with the upstream failed")   \
	X(TOO_EARLY, 425, "too_early", "unsafe request in TLS early data")         \
	X(FORGED_HEADER, 0, "forged_header", "client sent a header only weir may set, or a lookalike of one") \
	X(UNDERSCORE_HEADER, 0, "underscore_header", "header with '_' dropped (underscores_in_headers = false)") \
	X(BAD_PATH, 400, "bad_path", "request path above the root, badly encoded, with '\\' or \"..;\"") \
	X(LOCAL_CONNECT_ERROR, 503, "local_connect_error", "no local resources to connect upstream") \
	X(BODY_TOO_SLOW, 408, "body_too_slow", "request body arrived below limits.client_body_rate") \
	X(SEND_TOO_SLOW, 0, "send_too_slow", "client read the response below limits.client_send_rate") \
	X(REQUEST_TIMEOUT, 408, "request_timeout", "request not received within timeouts.request") \
	X(REQUEST_TIMEOUT_UPSTREAM, 504, "request_timeout_upstream", "no answer within timeouts.request") \
	X(GRPC_DEADLINE, 504, "grpc_deadline", "gRPC call past its grpc-timeout") \
	X(ACCEPT_FAILED, 0, "accept_failed", "accept failed: out of descriptors or memory") \
	X(UPSTREAM_BAD_UPGRADE, 502, "upstream_bad_upgrade", "upstream switched protocols unasked or to another") \
	X(TUNNEL_ERROR, 0, "tunnel_error", "tunnel cut by a read or write error") \
	X(PROXY_PROTOCOL, 0, "proxy_protocol", "missing or malformed PROXY protocol header") \
	X(BAD_FORWARDED_FOR, 0, "bad_forwarded_for", "X-Forwarded-For entry from a trusted proxy is not an address") \
	X(SYSLOG_DROPPED, 0, "syslog_dropped", "access log datagram not taken by the syslog socket") \
	X(BAD_HEADER_VALUE, 500, "bad_header_value", "a header made from variables would hold a control byte or pass its size") \
	X(BREAKER_OPEN, 503, "breaker_open", "the upstream group's circuit breaker is open") \
	X(UPSTREAM_LIMIT, 503, "upstream_limit", "the upstream group's limits.max_requests or max_connections reached") \
	X(QUEUE_TIMEOUT, 503, "upstream_queue_timeout", "no place under the upstream group's limits within queue_timeout") \
	X(ADAPTIVE_CONCURRENCY, 503, "adaptive_concurrency", "over the upstream group's adaptive_concurrency limit, at once or after its queue") \
	X(AUTH_REQUIRED, 401, "auth_required", "missing or invalid credentials for a route with auth") \
	X(AUTH_FORBIDDEN, 403, "auth_forbidden", "credentials valid, consumer not in the route's auth.allow") \
	X(AUTH_BUSY, 503, "auth_busy", "unverified Basic credentials past the worker's auth.hash_rate") \
	X(AUTH_STALE, 503, "auth_stale", "route has auth this worker's configuration does not know") \
	X(AUTH_CLAIM_DROPPED, 0, "auth_claim_dropped", "JWT claim not passed upstream: not a scalar, a control character, or too long") \
	X(RATE_LIMITED, 429, "rate_limited", "refused by a rate limit (its status may differ)") \
	X(HEADER_SPACE, 500, "header_space", "no room in the stream's arena for a rewritten header") \
	X(COMPRESS_FAILED, 0, "compress_failed", "response encoder failed (out of pool memory); the response is cut") \
	X(REGEX_LIMIT, 0, "regex_limit", "a route regex gave up at its match limit: taken as no match") \
	X(REWRITE_FAILED, 500, "rewrite_failed", "a route's strip_prefix or rewrite gave no origin-form path") \
	X(REWRITE_TOO_LONG, 414, "rewrite_too_long", "a route's rewritten request target passes 4 KiB") \
	X(FWD_AUTH_FAILED, 502, "forward_auth_failed", "the forward auth service answered other than 2xx, 401 or 403, or invalidly") \
	X(FWD_AUTH_UNREACHABLE, 503, "forward_auth_unreachable", "no server of the forward auth group answered within its timeout") \
	X(HEADER_RULE_DROPPED, 0, "header_rule_dropped", "a header rule's value from variables held CR, LF, NUL or another control byte, or passed 4 KiB: the header was not written") \
	X(H2_PROTOCOL, 0, "h2_protocol", "HTTP/2 connection error: GOAWAY and close") \
	X(H2_STREAMS, 0, "h2_streams", "HTTP/2 stream past http2.max_concurrent_streams refused") \
	X(H2_RAPID_RESET, 0, "h2_rapid_reset", "HTTP/2 client reset streams past http2.max_resets a second") \
	X(H2_CONTINUATION, 0, "h2_continuation", "HTTP/2 header block past http2.max_continuations") \
	X(H2_FLOOD, 0, "h2_flood", "HTTP/2 frames doing no work past http2.control_frames a second") \
	X(H2_OVERHEAD, 0, "h2_overhead", "HTTP/2 bytes past http2.overhead_ratio x their payload") \
	X(H2_SETTINGS_TIMEOUT, 0, "h2_settings_timeout", "HTTP/2 client did not acknowledge SETTINGS in time") \
	X(TRAILER_DROPPED, 0, "trailer_dropped", "a trailer field RFC 9110 6.5.1 keeps out of trailers (framing, routing, hop-by-hop, auth, controls) was dropped") \
	X(H2_CONNECT, 501, "h2_connect", "HTTP/2 CONNECT without :protocol, or with one other than websocket") \
	X(H2_WS_REQUEST, 400, "h2_websocket_request", "HTTP/2 WebSocket CONNECT without :scheme, :path or :authority, or with a Sec-WebSocket-Version other than 13") \
	X(H2_WS_BAD_ACCEPT, 502, "h2_websocket_bad_accept", "upstream's 101 to an HTTP/2 WebSocket had a missing or wrong Sec-WebSocket-Accept") \
	X(H2_WS_NO_SWITCH, 502, "h2_websocket_no_switch", "upstream answered an HTTP/2 WebSocket with a 2xx, not a switch") \
	X(UPSTREAM_ALPN, 502, "upstream_alpn", "TLS upstream of a protocol = \"h2\" group did not pick h2 by ALPN") \
	X(UPSTREAM_RESET, 502, "upstream_reset", "HTTP/2 upstream reset the stream") \
	X(UPSTREAM_H2, 502, "upstream_h2_protocol", "HTTP/2 upstream broke the protocol: the session is closed") \
	X(CLIENT_ABORTED, 0, "client_aborted", "client closed the connection before its answer: the upstream request was abandoned")

#define WEIR_OK 0

/* Table indexes: WEIR_EAGAIN_INDEX is 0, and so on. */
enum weir_err {
#define WEIR_ERR_ENUM(name, status, counter, text) WEIR_E##name##_INDEX,
	WEIR_ERR_TABLE(WEIR_ERR_ENUM)
#undef WEIR_ERR_ENUM
	WEIR_ERR_COUNT
};

/* The returned codes are the negated index plus one, so 0 stays "ok". */
#define WEIR_ERR(name) (-(int)WEIR_E##name##_INDEX - 1)
#define WEIR_EAGAIN WEIR_ERR(AGAIN)

/* Index of code <rc> (negative) in the table, or -1 if it is not one. */
static inline int weir_err_index(int rc)
{
	int i = -rc - 1;
	return (rc < 0 && i < WEIR_ERR_COUNT) ? i : -1;
}

/* The log sentence, counter name and HTTP status of <rc>; rc must be < 0. */
const char *weir_err_text(int rc);
const char *weir_err_counter(int rc);
int weir_err_status(int rc);

#endif
