# Run at every build (`cmake -DSOURCE=... -DOUT=... -P git_commit.cmake`): writes OUT, the header
# that stamps xtrapVersion() with the commit the binary was built from, and touches it only when
# that changes. "+modified" marks a build from sources that differ from the commit, so results
# never name a commit whose code did not make them.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY "${SOURCE}"
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit unknown)
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no -- src probes CMakeLists.txt
                  WORKING_DIRECTORY "${SOURCE}" OUTPUT_VARIABLE changed OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changed)
    string(APPEND commit "+modified")
  endif()
endif()
set(text "#pragma once\n#define XTRAP_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
