/* The running library's version (include/parity/version.h.in, from CMake's project(VERSION)). */
#include "parity/version.h"

const char *parity_version_string(void) { return PARITY_VERSION_STRING; }

unsigned parity_version_number(void) { return (unsigned)PARITY_VERSION_NUMBER; }
