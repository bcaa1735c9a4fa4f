/* dt_version: the library's version string, made from the header's
 * DT_VERSION_* macros (CMake checks they equal project()'s VERSION). */
#include <dtorch/dtorch.h>

#define VERSION_STR2(x) #x
#define VERSION_STR(x) VERSION_STR2(x)

const char *dt_version(void) {
  return VERSION_STR(DT_VERSION_MAJOR) "." VERSION_STR(DT_VERSION_MINOR) "."
      VERSION_STR(DT_VERSION_PATCH);
}
