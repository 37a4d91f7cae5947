# cmake -DSOURCE_DIR=... -DBUILD_DIR=... -DWORK_DIR=... [-DLAUNCHER=ccache] -P this file
function(run)
  message(STATUS "> ${ARGN}")
  execute_process(COMMAND ${ARGN} COMMAND_ERROR_IS_FATAL ANY)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run(${prefix}/bin/meshtrain info)
# The examples, copied out of the source tree, see only the installed package: its headers,
# libraries and CMake files. A user's warnings are errors here: the public headers must compile
# cleanly in strict projects.
file(COPY ${SOURCE_DIR}/examples DESTINATION ${WORK_DIR}/user_project)
run(${CMAKE_COMMAND} -S ${WORK_DIR}/user_project/examples -B ${WORK_DIR}/examples
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror"
    -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/examples -j2)
run(${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/examples --output-on-failure -V)
file(REMOVE_RECURSE ${WORK_DIR})
