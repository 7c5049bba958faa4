/*
 * main.c: weir's command line. Reads the options, loads the config, and
 * either checks it (-t) or hands it to the master.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ev.h>
#include <http_parser.h>
#include <libconfig.h>
#include <openssl/base.h>
#include <openssl/crypto.h>

#include "common/config.h"
#include "common/config_dump.h"
#include "common/log.h"
#include "common/secmem.h"
#include "master/logfiles.h"
#include "master/master.h"

#define WEIR_DEFAULT_CONFIG WEIR_SYSCONFDIR "/weir/weir.conf"

static const char usage_text[] =
	"Usage: weir [-c FILE] [-t | -T] [-h] [-v] [-V]\n"
	"\n"
	"weir is a reverse proxy and API gateway for HTTP/1.1. A master process binds\n"
	"the listening sockets and forks one worker per core; each worker accepts\n"
	"clients, routes every request by host and path prefix to an upstream group\n"
	"and forwards it over kept-alive upstream connections.\n"
	"\n"
	"Options:\n"
	"  -c, --config FILE   read the configuration from FILE\n"
	"                      (default: " WEIR_DEFAULT_CONFIG ")\n"
	"  -t, --test          check the configuration and exit: 0 if it is valid,\n"
	"                      1 with one \"FILE:LINE: problem\" line per problem\n"
	"  -T, --dump          check the configuration as -t does, then print it as\n"
	"                      weir sees it (every default filled in, stats.admin_token\n"
	"                      masked) to standard output, in a form -t accepts\n"
	"  -h, --help          print this help and exit\n"
	"  -v, --version       print the version and exit\n"
	"  -V, --build-info    print the version, build options and library versions\n"
	"\n"
	"weir stays in the foreground; run it under systemd or another supervisor.\n"
	"\n"
	"Signals (send them to the master):\n"
	"  QUIT        graceful stop: stop accepting, let in-flight requests finish\n"
	"              (bounded by timeouts.drain), then exit\n"
	"  TERM, INT   fast stop: close every connection and exit\n"
	"  USR1        reopen the log files (after logrotate has moved them)\n"
	"  HUP         reload the configuration: a bad one is logged and changes\n"
	"              nothing; a good one starts new workers on the same sockets\n"
	"              and drains the old ones\n"
	"  USR2        binary upgrade: start the binary at the path weir was started\n"
	"              from, hand it the sockets, and drain once it serves\n"
	"\n"
	"Exit status: 0 after a requested stop, 1 on a configuration or start-up\n"
	"error, 2 on a usage error.\n"
	"\n"
	"Files:\n"
	"  " WEIR_DEFAULT_CONFIG "   default configuration (see docs/config.md)\n";

static void print_build_info(void)
{
	printf("weir %s\n", WEIR_VERSION);
	printf("built with: %s, -std=c11\n", __VERSION__);
	printf("libev %d.%d (runtime %d.%d)\n", EV_VERSION_MAJOR, EV_VERSION_MINOR, ev_version_major(),
	       ev_version_minor());
	printf("http-parser %d.%d.%d\n", HTTP_PARSER_VERSION_MAJOR, HTTP_PARSER_VERSION_MINOR,
	       HTTP_PARSER_VERSION_PATCH);
	printf("libconfig %d.%d.%d\n", LIBCONFIG_VER_MAJOR, LIBCONFIG_VER_MINOR, LIBCONFIG_VER_REVISION);
	printf("BoringSSL (%s)\n", OpenSSL_version(OPENSSL_VERSION));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"test", no_argument, NULL, 't'},
		{"dump", no_argument, NULL, 'T'},
		{"help", no_argument, NULL, 'h'},         {"version", no_argument, NULL, 'v'},
		{"build-info", no_argument, NULL, 'V'},   {NULL, 0, NULL, 0},
	};
	const char *path = WEIR_DEFAULT_CONFIG;
	int test = 0, c;
	struct config *cfg;
	struct config_errors *errs;

	while ((c = getopt_long(argc, argv, "c:tThvV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 't':
			test = 1;
			break;
		case 'T':
			test = 2;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'v':
			printf("weir %s\n", WEIR_VERSION);
			return 0;
		case 'V':
			print_build_info();
			return 0;
		default:
			fputs("Try 'weir --help' for more information.\n", stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weir: unexpected argument '%s'\nTry 'weir --help' for more information.\n", argv[optind]);
		return 2;
	}

	/* BoringSSL's heap, out of core dumps: before any key is read */
	if (secmem_init() < 0) {
		fputs("weir: cannot map memory for TLS secrets\n", stderr);
		return 1;
	}
	cfg = calloc(1, sizeof(*cfg));
	errs = calloc(1, sizeof(*errs));
	if (!cfg || !errs) {
		fputs("weir: out of memory\n", stderr);
		return 1;
	}
	if (config_load(path, cfg, errs) < 0) {
		int kept = errs->count < CONFIG_MAX_ERRORS ? errs->count : CONFIG_MAX_ERRORS;
		for (int i = 0; i < kept; i++)
			fprintf(stderr, "%s\n", errs->msg[i]);
		if (errs->count > kept)
			fprintf(stderr, "%s: %d more problems not shown\n", path, errs->count - kept);
		fprintf(stderr, "weir: configuration %s is invalid\n", path);
		free(errs);
		free(cfg);
		return 1;
	}
	free(errs);
	if (test) {
		/* -T, as nginx -T: the verdict on stderr, so that stdout is the file */
		int rc = 0;

		fprintf(test == 2 ? stderr : stdout,
		        "weir: configuration %s is valid: %d listener(s), %d upstream(s), %d route(s), %d worker(s)\n",
		        path, cfg->nlisteners, cfg->nupstreams, cfg->nroutes, cfg->workers);
		if (test == 2 && config_dump(stdout, cfg) < 0) {
			fprintf(stderr, "weir: cannot write the configuration: %m\n");
			rc = 1;
		}
		config_free(cfg);
		free(cfg);
		return rc;
	}
	if (logfiles_open(cfg) < 0) {
		fprintf(stderr, "weir: cannot open the log files: %m\n");
		return 1;
	}
	{
		char who[32];
		snprintf(who, sizeof(who), "master %d", (int)getpid());
		log_set_who(who);
	}
	return master_run(cfg, argv);
}
