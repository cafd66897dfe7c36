# Site deployment: install rules for the plugstack.conf drop-in, the man pages, the sbatch
# templates and the site snippets, and the Debian package (`cpack -G DEB` in the build tree).
# Included at the end of the top-level CMakeLists.txt, after every install() of the targets.
include_guard(GLOBAL)

set(DTRAIN_PLUGSTACK_DROPIN_DIR /etc/slurm/plugstack.conf.d CACHE PATH
  "Directory of plugstack.conf drop-ins (Debian's plugstack.conf includes plugstack.conf.d/*.conf)")
set(DTRAIN_DEB_SLURM_PACKAGE slurmd CACHE STRING
  "Debian package whose exact version the dtrain package depends on")
set(DTRAIN_DEB_MAINTAINER "dtrain developers <root@localhost>" CACHE STRING
  "Maintainer field of the Debian package")

# The package always installs under /usr, whatever CMAKE_INSTALL_PREFIX a developer build uses.
set(DTRAIN_PACKAGE_PREFIX /usr)

function(dtrain_packaged_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${DTRAIN_PACKAGE_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

# Slurm loads plugins from its PluginDir; Debian's is <libdir of libslurm>/slurm-wlm. The plugin
# must land there, or the drop-in names a file that slurmstepd cannot open.
get_filename_component(_dtrain_slurm_libdir "${SLURM_LIBRARY}" DIRECTORY)
get_filename_component(_dtrain_slurm_libdir "${_dtrain_slurm_libdir}" REALPATH)
find_path(DTRAIN_SLURM_PLUGIN_DIR NAMES auth_munge.so select_cons_tres.so
  PATHS ${_dtrain_slurm_libdir}/slurm-wlm ${_dtrain_slurm_libdir}/slurm NO_DEFAULT_PATH
  DOC "Slurm's PluginDir on this machine (where the package must put spank_dtrain.so)")
dtrain_packaged_path(DTRAIN_PACKAGED_PLUGIN_DIR "${DTRAIN_SPANK_PLUGIN_DIR}")
# /usr/lib and /lib are one directory on Debian 12 (merged /usr); compare the /usr spelling.
string(REGEX REPLACE "^/lib/" "/usr/lib/" _dtrain_slurm_plugin_dir "${DTRAIN_SLURM_PLUGIN_DIR}")
set(DTRAIN_PACKAGE_PLUGIN_PROBLEM "")
if(NOT DTRAIN_SLURM_PLUGIN_DIR)
  string(CONCAT DTRAIN_PACKAGE_PLUGIN_PROBLEM
    "no Slurm plugin directory (slurm-wlm/ or slurm/ holding auth_munge.so) next to "
    "${SLURM_LIBRARY}; set -DDTRAIN_SLURM_PLUGIN_DIR=<Slurm's PluginDir>")
elseif(NOT DTRAIN_PACKAGED_PLUGIN_DIR STREQUAL _dtrain_slurm_plugin_dir)
  string(CONCAT DTRAIN_PACKAGE_PLUGIN_PROBLEM
    "the package would install spank_dtrain.so to ${DTRAIN_PACKAGED_PLUGIN_DIR}, but Slurm "
    "loads plugins from ${_dtrain_slurm_plugin_dir}; reconfigure with "
    "-DDTRAIN_SPANK_PLUGIN_DIR=${_dtrain_slurm_plugin_dir} (or -DCMAKE_INSTALL_PREFIX=/usr, "
    "which makes the library directory Debian's multiarch one)")
endif()
if(DTRAIN_PACKAGE_PLUGIN_PROBLEM)
  message(WARNING "dtrain: cpack -G DEB will refuse to build the package: "
                  "${DTRAIN_PACKAGE_PLUGIN_PROBLEM}")
endif()

# --- Installed files ----------------------------------------------------------------------
set(_dtrain_site_dir ${PROJECT_SOURCE_DIR}/slurm/site)
# The repository's drop-in names Debian's amd64 plugin path; the installed one names the path
# this package really uses.
file(READ ${_dtrain_site_dir}/dtrain.conf _dtrain_dropin)
string(REPLACE "/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_dtrain.so"
  "${DTRAIN_PACKAGED_PLUGIN_DIR}/spank_dtrain.so" _dtrain_dropin "${_dtrain_dropin}")
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/packaging/dtrain.conf CONTENT "${_dtrain_dropin}"
  @ONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_dtrain_site_dir}/dtrain.conf)
install(FILES ${PROJECT_BINARY_DIR}/packaging/dtrain.conf
  DESTINATION ${DTRAIN_PLUGSTACK_DROPIN_DIR})

# Debian policy: man pages compressed with gzip -9n (no name or time stamp: reproducible).
find_program(DTRAIN_GZIP gzip REQUIRED)
set(_dtrain_man_gz "")
foreach(page IN ITEMS spank_dtrain.8 dtrain-plan.1 dtrain-bench.1 dtrain-check.1
                      dtrain-trainer.1)
  set(source ${PROJECT_SOURCE_DIR}/slurm/man/${page})
  set(compressed ${PROJECT_BINARY_DIR}/packaging/man/${page}.gz)
  add_custom_command(OUTPUT ${compressed}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/packaging/man
    COMMAND ${DTRAIN_GZIP} -9nc ${source} > ${compressed}
    DEPENDS ${source} VERBATIM)
  list(APPEND _dtrain_man_gz ${compressed})
  string(REGEX MATCH "[0-9]$" section ${page})
  install(FILES ${compressed} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()
add_custom_target(dtrain_man_pages ALL DEPENDS ${_dtrain_man_gz})

file(GLOB _dtrain_examples ${PROJECT_SOURCE_DIR}/slurm/examples/*.sbatch)
install(FILES ${_dtrain_examples} ${PROJECT_SOURCE_DIR}/slurm/examples/README.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES ${_dtrain_site_dir}/slurm.conf.reserved-ports ${_dtrain_site_dir}/slurm.conf.gres-gpus
              ${_dtrain_site_dir}/mpi.conf.pmix-fence ${_dtrain_site_dir}/topology.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/site)

# --- Debian package -----------------------------------------------------------------------
# A SPANK plugin only loads into the Slurm release it was built against, so the package pins
# the exact Debian version of Slurm found now. Without a Debian Slurm (built from source), pin
# the upstream release of slurm_version.h: any packaging revision of exactly that release.
execute_process(COMMAND dpkg-query -W -f=\${Version} ${DTRAIN_DEB_SLURM_PACKAGE}
  OUTPUT_VARIABLE _dtrain_slurm_deb_version ERROR_QUIET RESULT_VARIABLE _dtrain_dpkg_rc)
if(_dtrain_dpkg_rc EQUAL 0 AND _dtrain_slurm_deb_version)
  set(DTRAIN_SLURM_DEPENDENCY "${DTRAIN_DEB_SLURM_PACKAGE} (= ${_dtrain_slurm_deb_version})")
else()
  string(REPLACE "." ";" _dtrain_v "${DTRAIN_SLURM_VERSION}")
  list(GET _dtrain_v 0 _dtrain_major)
  list(GET _dtrain_v 1 _dtrain_minor)
  list(GET _dtrain_v 2 _dtrain_micro)
  # Slurm writes the minor version with two digits (22.05), slurm_version.h as a number.
  string(LENGTH "${_dtrain_minor}" _dtrain_len)
  if(_dtrain_len EQUAL 1)
    set(_dtrain_minor "0${_dtrain_minor}")
  endif()
  math(EXPR _dtrain_next_micro "${_dtrain_micro} + 1")
  set(DTRAIN_SLURM_DEPENDENCY
    "${DTRAIN_DEB_SLURM_PACKAGE} (>= ${_dtrain_major}.${_dtrain_minor}.${_dtrain_micro}), ${DTRAIN_DEB_SLURM_PACKAGE} (<< ${_dtrain_major}.${_dtrain_minor}.${_dtrain_next_micro})")
endif()
message(STATUS "dtrain: the Debian package will depend on ${DTRAIN_SLURM_DEPENDENCY}")

# Files under /etc are the administrator's: dpkg keeps local edits across upgrades.
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/packaging/conffiles
  CONTENT "${DTRAIN_PLUGSTACK_DROPIN_DIR}/dtrain.conf\n")
# cpack reads this file when it starts, so a package with the plugin in the wrong place is
# refused before it is built.
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/packaging/CPackProjectConfig.cmake CONTENT
"if(CPACK_GENERATOR STREQUAL \"DEB\" AND NOT \"@DTRAIN_PACKAGE_PLUGIN_PROBLEM@\" STREQUAL \"\")
  message(FATAL_ERROR \"dtrain: @DTRAIN_PACKAGE_PLUGIN_PROBLEM@\")
endif()
" @ONLY)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dtrain)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR dtrain)
set(CPACK_PACKAGE_CONTACT "${DTRAIN_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Slurm SPANK plugin and bootstrap tools for distributed training")
set(CPACK_PACKAGE_DESCRIPTION
"srun --distributed-train gives every task of a Slurm job step its rank, world size,
ordered endpoints and master address in the names of PyTorch, PaddlePaddle, TensorFlow and
dtrain, and binds it to its GPUs, NICs and CPU cores. The package holds the SPANK plugin,
a plugstack.conf.d drop-in that is disabled until edited, the tools dtrain-plan,
dtrain-check, dtrain-bench and dtrain-trainer, man pages, sbatch templates and site
configuration examples. It is built for exactly one Slurm release.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${DTRAIN_PACKAGE_PREFIX})
# Debug information would make the package four times larger.
set(CPACK_STRIP_FILES ON)
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/packaging/CPackProjectConfig.cmake)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DTRAIN_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${DTRAIN_SLURM_DEPENDENCY}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libdtrain_bootstrap is part of this package; dpkg-shlibdeps finds it in the build tree.
get_target_property(_dtrain_bootstrap_dir dtrain_bootstrap BINARY_DIR)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_dtrain_bootstrap_dir})
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/packaging/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
