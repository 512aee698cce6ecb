/* placeholder: being written */
#include "parity/format.h"
