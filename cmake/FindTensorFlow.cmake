# Finds the pip-installed TensorFlow through its own tf.sysconfig (the compile
# flags carry the C++ standard and _GLIBCXX_USE_CXX11_ABI that TF was built
# with; the ops must match them).
#   TensorFlow_FOUND, TensorFlow_VERSION, target TensorFlow::framework
if(NOT Python_EXECUTABLE)
  find_package(Python 3.9 COMPONENTS Interpreter)
endif()
set(_tf_env "import os; os.environ['TF_CPP_MIN_LOG_LEVEL']='3'; import tensorflow as tf")
execute_process(COMMAND ${Python_EXECUTABLE} -c "${_tf_env}; print(tf.__version__)"
  OUTPUT_VARIABLE TensorFlow_VERSION ERROR_QUIET RESULT_VARIABLE _tf_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_tf_rc EQUAL 0)
  string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+[^ \n]*$" TensorFlow_VERSION "${TensorFlow_VERSION}")
  execute_process(COMMAND ${Python_EXECUTABLE} -c
    "${_tf_env}; print('|'.join(tf.sysconfig.get_compile_flags()), end='')"
    OUTPUT_VARIABLE _tf_cflags ERROR_QUIET)
  execute_process(COMMAND ${Python_EXECUTABLE} -c
    "${_tf_env}; print('|'.join(tf.sysconfig.get_link_flags()), end='')"
    OUTPUT_VARIABLE _tf_lflags ERROR_QUIET)
  string(REPLACE "|" ";" _tf_cflags "${_tf_cflags}")
  string(REPLACE "|" ";" _tf_lflags "${_tf_lflags}")
  set(_inc "")
  set(_defs "")
  foreach(f IN LISTS _tf_cflags)
    if(f MATCHES "^-I(.*)")
      list(APPEND _inc "${CMAKE_MATCH_1}")
    elseif(f MATCHES "^-D(.*)")
      list(APPEND _defs "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(_libdir "")
  set(_lib "")
  foreach(f IN LISTS _tf_lflags)
    if(f MATCHES "^-L(.*)")
      set(_libdir "${CMAKE_MATCH_1}")
    elseif(f MATCHES "^-l:(.*)")
      set(_lib "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(_libdir AND _lib AND EXISTS "${_libdir}/${_lib}")
    add_library(TensorFlow::framework SHARED IMPORTED)
    set_target_properties(TensorFlow::framework PROPERTIES
      IMPORTED_LOCATION "${_libdir}/${_lib}"
      INTERFACE_INCLUDE_DIRECTORIES "${_inc}"
      INTERFACE_COMPILE_DEFINITIONS "${_defs}")
    set(TensorFlow_LIBRARY_DIR "${_libdir}")
  endif()
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(TensorFlow REQUIRED_VARS TensorFlow_LIBRARY_DIR
                                  VERSION_VAR TensorFlow_VERSION)
