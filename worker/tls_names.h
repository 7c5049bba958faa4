/*
 * tls_names.h: choosing a listener's certificate from the SNI host name.
 *
 * Principle: the names come from the certificates (common/tlscert.h), so a
 * certificate is served for exactly the names a client will accept it for.
 * An exact name wins over a wildcard, whichever certificate carries it; among
 * equals the certificate listed first wins; no match (or no SNI) means the
 * listener's first certificate. A wildcard "*.example.com" covers one label:
 * "a.example.com", not "example.com" nor "a.b.example.com" (RFC 6125 6.4.3).
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

/* The certificate for <host> among <n> names, or -1 when none fits. */
int tls_names_pick(const struct tls_name *names, int n, const char *host, size_t hlen);

#endif
