/* fuzz_config.c: the configuration loader on arbitrary file contents. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	char *errors = NULL;
	struct config *cf;
	FILE *f;

	if (path[0] == '\0')
		snprintf(path, sizeof(path), "/tmp/erd-fuzz-config-%d",
		    (int)getpid());
	if ((f = fopen(path, "w")) == NULL)
		abort();
	fwrite(data, 1, size, f);
	fclose(f);
	proto_builtin_register();	/* as main does; again: nothing */
	cf = config_load(path, &errors);
	/* Exactly one of: a configuration, or an error text. */
	if ((cf == NULL) == (errors == NULL))
		abort();
	if (errors != NULL && strstr(errors, path) == NULL)
		abort();	/* every error names the file */
	config_unref(cf);
	free(errors);
	return 0;
}
