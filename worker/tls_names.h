/*
 * tls_names.h: matching the SNI host name against a certificate's names.
 *
 * Principle: the names come from the certificates (common/tlscert.h), so a
 * certificate is served for exactly the names a client will accept it for.
 * An exact name wins over a wildcard, whichever certificate carries it; among
 * equals the certificate listed first wins; no match (or no SNI) means the
 * listener's first certificate. A wildcard "*.example.com" covers one label:
 * "a.example.com", not "example.com" nor "a.b.example.com" (RFC 6125 6.4.3).
 * Among equals, worker/tls_pick.h then goes by the key types the client can
 * verify (an ECDSA and an RSA certificate for the same names), and makes
 * the choice (tls_pick_choose_cert).
 */
#ifndef WEIR_WORKER_TLS_NAMES_H
#define WEIR_WORKER_TLS_NAMES_H

#include <stddef.h>

struct tls_name {
	const char *name; /* lower case, "*.example.com" for a wildcard */
	size_t len;
	int cert;         /* index of the certificate within its listener */
};

/* 2 when <host> (<hlen> bytes, any case, one trailing dot allowed) equals
 * <pattern>, 1 when wildcard <pattern> covers it, 0 otherwise. */
int tls_name_match(const char *pattern, size_t plen, const char *host, size_t hlen);

#endif
