/*
 * respond.h: a route's return = { ... }: a redirect or a fixed body,
 * answered by weir without an upstream.
 *
 * Principle: the answer is written whole (head and body) into one buffer
 * of its size and queued as the response of the transaction, so keep-alive,
 * pipelining, the client's send deadline, counters and the access log are
 * those of any proxied answer. The location and the body are templates
 * (common/vars.h) expanded for the request; a location whose variables
 * would put CR, LF or another control byte in the head (the parser refuses
 * such bytes in what variables read: a guard), or make it pass 8 KiB, is
 * not sent: the request is answered 500 and counted as
 * weir_errors_total{kind="bad_header_value"}. A request body
 * is not read: the connection lingers to discard it and then closes, as
 * after any answer given before the body.
 */
#ifndef WEIR_WORKER_RESPOND_H
#define WEIR_WORKER_RESPOND_H

struct txn;

/* Answers <t>, whose route has a return, and pumps it out. */
void respond_start(struct txn *t);

#endif
