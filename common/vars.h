/*
 * vars.h: named variables ($host, $request_uri, $http_user_agent ...) and
 * the templates that use them (access log formats, redirect locations,
 * direct response bodies; header rules and limit keys later).
 *
 * Principle: a template is compiled once, when the configuration is read,
 * into a flat, pointer-free list of pieces (a literal span or a variable
 * id), so it means the same in the master, in every worker and in the
 * shared segment's route tables. A request expands it into a buffer the
 * caller owns (worker/vars.h), allocating nothing. An unknown variable is
 * a configuration error with its line, never a silent empty string.
 *
 * Syntax: "$name" takes the longest run of [a-z0-9_] after the '$';
 * "${name}" ends a name where letters follow; "$$" is one '$'. The
 * families $http_NAME (a request header, '_' matching '-', any case),
 * $cookie_NAME and $arg_NAME (a query argument, as sent, not decoded)
 * take any NAME.
 */
#ifndef WEIR_COMMON_VARS_H
#define WEIR_COMMON_VARS_H

#include <stddef.h>
#include <stdint.h>

#define VARS_PIECES 64   /* pieces of one template, at most */
#define VARS_TEXT 4096   /* bytes of literal text and family names, at most */

/* The variables, by id. VARS_LITERAL is a span of the template's text. */
#define VARS_TABLE(X)                                                                   \
	X(CLIENT_IP, "client_ip", "the client's address, after trusted_proxies")        \
	X(REMOTE_ADDR, "remote_addr", "the same as `$client_ip` (nginx's name)")        \
	X(PEER_ADDR, "peer_addr", "the connection's source (after a PROXY header)")   \
	X(HOST, "host", "the request's Host, without its port")                        \
	X(PATH, "path", "the path, normalised, without the query")                      \
	X(REQUEST_URI, "request_uri", "path and query as forwarded")                    \
	X(QUERY_STRING, "query_string", "the query, without `?`")                       \
	X(ARGS, "args", "the same as `$query_string`")                                  \
	X(METHOD, "method", "the request method")                                       \
	X(REQUEST_METHOD, "request_method", "the same as `$method`")                    \
	X(PROTOCOL, "server_protocol", "`HTTP/1.1` or `HTTP/1.0`")                      \
	X(REQUEST, "request", "the request line: method, target, protocol")             \
	X(SCHEME, "scheme", "`http` or `https`")                                        \
	X(STATUS, "status", "the answer's status")                                      \
	X(REQUEST_ID, "request_id", "the request's X-Request-Id")                       \
	X(UPSTREAM_ADDR, "upstream_addr", "the server that answered, or `-`")           \
	X(TLS_SNI, "tls_sni", "the server name the client asked for in TLS")            \
	X(ROUTE, "route", "the route that matched: host pattern and path")              \
	X(REQUEST_TIME, "request_time", "seconds from the first byte, ms precision")    \
	X(UPSTREAM_RESPONSE_TIME, "upstream_response_time", "seconds the upstream took, or `-`") \
	X(BYTES_SENT, "bytes_sent", "bytes sent to the client")                         \
	X(BODY_BYTES_SENT, "body_bytes_sent", "bytes sent without the response head")   \
	X(TIME_ISO, "time_iso8601", "UTC time, `2026-11-30T05:40:00.123Z`")              \
	X(TIME_LOCAL, "time_local", "local time, `30/Nov/2026:05:40:00 +0000`")         \
	X(MSEC, "msec", "Unix time in seconds, ms precision")                           \
	X(REMOTE_USER, "remote_user", "the same as `$consumer` (nginx's name)")          \
	X(CONSUMER, "consumer", "who the route's auth credentials name, or empty")       \
	X(CTL, "ctl", "the traffic control that acted (`breaker_open`, `retried`, ...), or empty") \
	X(HTTP, "http_", "a request header: `$http_user_agent`")                        \
	X(COOKIE, "cookie_", "a cookie of the request: `$cookie_session`")              \
	X(ARG, "arg_", "a query argument as sent: `$arg_page`")                        \
	X(JWT_CLAIM, "jwt_claim_", "a claim of the route's verified JWT: `$jwt_claim_sub` (request header rules)")

enum vars_id {
	VARS_LITERAL,
#define VARS_ENUM(id, name, doc) VARS_##id,
	VARS_TABLE(VARS_ENUM)
#undef VARS_ENUM
	VARS_COUNT
};

struct vars_piece {
	uint8_t id;   /* enum vars_id */
	uint16_t off; /* literal: its span of text; a family: the NAME */
	uint16_t len;
};

struct vars_tpl {
	uint16_t n;    /* pieces */
	uint16_t used; /* bytes of text */
	struct vars_piece p[VARS_PIECES];
	char text[VARS_TEXT];
};

/* Compiles <src> into <t>. Returns NULL, or why it cannot be ("uses the
 * unknown variable $hots"), worded to follow the key's name. */
const char *vars_compile(struct vars_tpl *t, const char *src);

/* Whether <t> uses variable <id>. */
int vars_uses(const struct vars_tpl *t, enum vars_id id);

/* Writes <t> back as a template (variables as "${name}") into <buf>;
 * returns its length. */
size_t vars_source(const struct vars_tpl *t, char *buf, size_t cap);

/* The variable's name ("http_" for a family) and doc, for the docs. */
const char *vars_name(enum vars_id id);
const char *vars_doc(enum vars_id id);

#endif
