# SPDX-License-Identifier: Apache-2.0
# Site deployment: install rules for the plugstack.conf drop-in, the man pages, the sbatch
# templates and the site snippets, and the packages: `cpack -G DEB` and `cpack -G RPM` in the
# build tree (slurm/packaging/dtrain.spec builds the RPM from a source tarball instead).
# Included at the end of the top-level CMakeLists.txt, after every install() of the targets.
include_guard(GLOBAL)

set(DTRAIN_PLUGSTACK_DROPIN_DIR /etc/slurm/plugstack.conf.d CACHE PATH
  "Directory of plugstack.conf drop-ins (Debian's plugstack.conf includes plugstack.conf.d/*.conf)")
# Debian's slurm-wlm-basic-plugins holds what the plugin needs at run time: libslurmfull.so,
# whose symbols the plugin resolves when srun or slurmstepd loads it, Slurm's PluginDir and the
# plugstack.conf that includes plugstack.conf.d/. Login nodes (slurm-client) and compute nodes
# (slurmd) both have it, and both of those depend on exactly their own version of it, so pinning
# its version refuses a mismatched Slurm without pulling slurmd onto login nodes.
set(DTRAIN_DEB_SLURM_PIN_PACKAGE slurm-wlm-basic-plugins CACHE STRING
  "Debian package whose exact version the dtrain package depends on (one that login and compute nodes both have)")
# The project's contact, as SECURITY.md gives it; a site that rebuilds the packages for its own
# repository may put its own here.
set(DTRAIN_PACKAGE_MAINTAINER "dtrain maintainers <maintainers@dtrain.dev>" CACHE STRING
  "Maintainer field of the Debian package (and packager of the RPM's changelog entry)")
# LICENSE at the top of the repository; not a site's choice.
set(DTRAIN_PACKAGE_LICENSE Apache-2.0)

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
function(dtrain_render_dropin output plugin_dir)
  file(READ ${_dtrain_site_dir}/dtrain.conf dropin)
  string(REPLACE "/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_dtrain.so"
    "${plugin_dir}/spank_dtrain.so" dropin "${dropin}")
  file(CONFIGURE OUTPUT ${output} CONTENT "${dropin}" @ONLY)
endfunction()
dtrain_render_dropin(${PROJECT_BINARY_DIR}/packaging/dtrain.conf "${DTRAIN_PACKAGED_PLUGIN_DIR}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_dtrain_site_dir}/dtrain.conf)
install(FILES ${PROJECT_BINARY_DIR}/packaging/dtrain.conf
  DESTINATION ${DTRAIN_PLUGSTACK_DROPIN_DIR})

# Debian policy: man pages compressed with gzip -9n (no name or time stamp: reproducible).
find_program(DTRAIN_GZIP gzip REQUIRED)
set(_dtrain_man_gz "")
# Every page in slurm/man/, so that a new tool's page cannot be left out of the packages
# (tests/deploy/check_docs.py checks that every installed tool has one).
file(GLOB _dtrain_man_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/slurm/man/*.[18])
foreach(source IN LISTS _dtrain_man_sources)
  get_filename_component(page ${source} NAME)
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
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${_dtrain_site_dir}/slurm.conf.reserved-ports ${_dtrain_site_dir}/slurm.conf.gres-gpus
              ${_dtrain_site_dir}/mpi.conf.pmix-fence ${_dtrain_site_dir}/topology.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/site)

# --- Slurm release -------------------------------------------------------------------------
# A SPANK plugin only loads into the Slurm release it was built against: Slurm's plugin loader
# refuses a spank plugin whose plugin_version (SLURM_VERSION_NUMBER at build time) differs in
# major or minor release, and the structures the plugin reads change between releases. Both
# packages therefore depend on exactly the release of the headers found now.
string(REPLACE "." ";" _dtrain_v "${DTRAIN_SLURM_VERSION}")
list(GET _dtrain_v 0 _dtrain_major)
list(GET _dtrain_v 1 _dtrain_minor)
list(GET _dtrain_v 2 _dtrain_micro)
# Slurm writes the minor version with two digits (22.05), slurm_version.h as a number.
string(LENGTH "${_dtrain_minor}" _dtrain_len)
if(_dtrain_len EQUAL 1)
  set(_dtrain_minor "0${_dtrain_minor}")
endif()
set(DTRAIN_SLURM_RELEASE "${_dtrain_major}.${_dtrain_minor}.${_dtrain_micro}")

# --- Debian package -----------------------------------------------------------------------
# The Debian package pins the exact Debian version of Slurm found now. Without a Debian Slurm
# (built from source), it pins the upstream release: any packaging revision of exactly it.
execute_process(COMMAND dpkg-query -W -f=\${Version} ${DTRAIN_DEB_SLURM_PIN_PACKAGE}
  OUTPUT_VARIABLE _dtrain_slurm_deb_version ERROR_QUIET RESULT_VARIABLE _dtrain_dpkg_rc)
if(_dtrain_dpkg_rc EQUAL 0 AND _dtrain_slurm_deb_version)
  set(DTRAIN_SLURM_DEPENDENCY "${DTRAIN_DEB_SLURM_PIN_PACKAGE} (= ${_dtrain_slurm_deb_version})")
else()
  math(EXPR _dtrain_next_micro "${_dtrain_micro} + 1")
  set(DTRAIN_SLURM_DEPENDENCY
    "${DTRAIN_DEB_SLURM_PIN_PACKAGE} (>= ${DTRAIN_SLURM_RELEASE}), ${DTRAIN_DEB_SLURM_PIN_PACKAGE} (<< ${_dtrain_major}.${_dtrain_minor}.${_dtrain_next_micro})")
endif()
message(STATUS "dtrain: the Debian package will depend on ${DTRAIN_SLURM_DEPENDENCY}")

# Files under /etc are the administrator's: dpkg keeps local edits across upgrades.
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/packaging/conffiles
  CONTENT "${DTRAIN_PLUGSTACK_DROPIN_DIR}/dtrain.conf\n")
# cpack reads this file when it starts, so a package with the plugin in the wrong place is
# refused before it is built. The RPM's plugin directory is DTRAIN_RPM_PLUGIN_DIR, not this
# machine's (see below).
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/packaging/CPackProjectConfig.cmake CONTENT
"if(CPACK_GENERATOR STREQUAL \"DEB\" AND NOT \"@DTRAIN_PACKAGE_PLUGIN_PROBLEM@\" STREQUAL \"\")
  message(FATAL_ERROR \"dtrain: @DTRAIN_PACKAGE_PLUGIN_PROBLEM@\")
endif()
" @ONLY)

# --- RPM package (RHEL, Rocky, Alma) ------------------------------------------------------
# `cpack -G RPM` holds the same files as the DEB, but RHEL's Slurm loads plugins from
# /usr/lib64/slurm. The install rules put the plugin where the Slurm of the build machine loads
# it (on Debian, slurm-wlm/), so one build tree makes both packages: after cpack has installed
# the files into its staging tree, the RPM's pre-build script moves the plugin to
# DTRAIN_RPM_PLUGIN_DIR and puts in the drop-in that names it there. (Install destinations
# cannot depend on the generator: cpack runs the install rules without its own variables.)
# slurm/packaging/dtrain.spec is the other way: a build on the RHEL machine itself.
if(_dtrain_slurm_plugin_dir MATCHES "/slurm$")
  set(_dtrain_rpm_plugin_default "${_dtrain_slurm_plugin_dir}")  # an RPM-installed Slurm here
else()
  set(_dtrain_rpm_plugin_default /usr/lib64/slurm)
endif()
set(DTRAIN_RPM_PLUGIN_DIR "${_dtrain_rpm_plugin_default}" CACHE PATH
  "Slurm's PluginDir on the RHEL-family nodes the RPM is for (SchedMD's and EPEL's slurm: /usr/lib64/slurm)")
set(DTRAIN_RPM_SLURM_PACKAGE slurm CACHE STRING
  "RPM package whose exact version the dtrain RPM requires (SchedMD's and EPEL's: slurm)")
if(NOT IS_ABSOLUTE "${DTRAIN_RPM_PLUGIN_DIR}")
  message(FATAL_ERROR "dtrain: DTRAIN_RPM_PLUGIN_DIR=${DTRAIN_RPM_PLUGIN_DIR} must be an absolute "
                      "path, Slurm's PluginDir on the target nodes, e.g. /usr/lib64/slurm")
endif()
# An RPM-installed Slurm of another release than the headers means a mixed installation.
find_program(DTRAIN_RPM_QUERY rpm DOC "rpm, to read the version of an RPM-installed Slurm")
if(DTRAIN_RPM_QUERY)
  execute_process(COMMAND ${DTRAIN_RPM_QUERY} -q --qf %{VERSION} ${DTRAIN_RPM_SLURM_PACKAGE}
    OUTPUT_VARIABLE _dtrain_slurm_rpm_version ERROR_QUIET RESULT_VARIABLE _dtrain_rpm_rc)
  if(_dtrain_rpm_rc EQUAL 0 AND NOT _dtrain_slurm_rpm_version STREQUAL DTRAIN_SLURM_RELEASE)
    message(WARNING "dtrain: the ${DTRAIN_RPM_SLURM_PACKAGE} RPM here is ${_dtrain_slurm_rpm_version}, "
                    "but the headers in ${SLURM_INCLUDE_DIR} are Slurm ${DTRAIN_SLURM_RELEASE}; "
                    "the RPM will require ${DTRAIN_SLURM_RELEASE}. Build against the installed "
                    "slurm-devel (-DSLURM_INCLUDE_DIR, -DSLURM_LIBRARY).")
  endif()
endif()
set(DTRAIN_RPM_SLURM_DEPENDENCY "${DTRAIN_RPM_SLURM_PACKAGE} = ${DTRAIN_SLURM_RELEASE}")
message(STATUS "dtrain: the RPM will require ${DTRAIN_RPM_SLURM_DEPENDENCY} and put the plugin "
               "into ${DTRAIN_RPM_PLUGIN_DIR}")

dtrain_render_dropin(${PROJECT_BINARY_DIR}/packaging/rpm/dtrain.conf "${DTRAIN_RPM_PLUGIN_DIR}")
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/packaging/rpm/pre_build.cmake CONTENT
[=[# Runs inside cpack after the files are installed into its staging tree, before the package is
# made (CPACK_PRE_BUILD_SCRIPTS); acts for the RPM only.
if(NOT CPACK_GENERATOR STREQUAL "RPM")
  return()
endif()
set(root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
set(installed "@DTRAIN_PACKAGED_PLUGIN_DIR@/spank_dtrain.so")
set(wanted "@DTRAIN_RPM_PLUGIN_DIR@/spank_dtrain.so")
if(NOT installed STREQUAL wanted)
  if(NOT EXISTS "${root}${installed}")
    message(FATAL_ERROR "dtrain: ${installed} is not in cpack's staging tree ${root}")
  endif()
  file(MAKE_DIRECTORY "${root}@DTRAIN_RPM_PLUGIN_DIR@")
  file(RENAME "${root}${installed}" "${root}${wanted}")
  # The Debian plugin directory and its parents, as far as the move emptied them.
  get_filename_component(dir "${installed}" DIRECTORY)
  while(NOT dir STREQUAL "/" AND IS_DIRECTORY "${root}${dir}")
    file(GLOB left LIST_DIRECTORIES true "${root}${dir}/*")
    if(left)
      break()
    endif()
    file(REMOVE_RECURSE "${root}${dir}")
    get_filename_component(dir "${dir}" DIRECTORY)
  endwhile()
endif()
file(COPY_FILE "@PROJECT_BINARY_DIR@/packaging/rpm/dtrain.conf"
  "${root}@DTRAIN_PLUGSTACK_DROPIN_DIR@/dtrain.conf")
# cpack marks every file installed to an absolute path %config; of those, only the drop-in is
# (CPACK_RPM_USER_FILELIST), not the plugin.
list(FILTER CPACK_ABSOLUTE_DESTINATION_FILES EXCLUDE REGEX "/spank_dtrain\.so$")
]=] @ONLY)

# The directories the package shares with Slurm and the system stay theirs (rpm -qf names one
# owner): the RPM owns only its own, and the drop-in directory, which SchedMD's slurm.spec
# does not create.
function(dtrain_with_parents out)
  set(dirs "")
  foreach(dir IN LISTS ARGN)
    while(NOT dir STREQUAL "/" AND NOT dir STREQUAL "")
      list(APPEND dirs "${dir}")
      get_filename_component(dir "${dir}" DIRECTORY)
    endwhile()
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()
get_filename_component(_dtrain_dropin_parent "${DTRAIN_PLUGSTACK_DROPIN_DIR}" DIRECTORY)
dtrain_packaged_path(_dtrain_rpm_libdir "${CMAKE_INSTALL_LIBDIR}")
dtrain_packaged_path(_dtrain_rpm_mandir "${CMAKE_INSTALL_MANDIR}")
dtrain_packaged_path(_dtrain_rpm_bindir "${CMAKE_INSTALL_BINDIR}")
dtrain_with_parents(_dtrain_rpm_shared_dirs "${_dtrain_dropin_parent}" "${DTRAIN_RPM_PLUGIN_DIR}"
  "${_dtrain_rpm_libdir}" "${_dtrain_rpm_mandir}/man1" "${_dtrain_rpm_mandir}/man8"
  "${_dtrain_rpm_bindir}")

string(TIMESTAMP _dtrain_changelog_date "%a %b %d %Y" UTC)
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/packaging/rpm/changelog CONTENT
"* ${_dtrain_changelog_date} ${DTRAIN_PACKAGE_MAINTAINER} - ${PROJECT_VERSION}-1
- dtrain ${PROJECT_VERSION} for Slurm ${DTRAIN_SLURM_RELEASE}
")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dtrain)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR dtrain)
set(CPACK_PACKAGE_CONTACT "${DTRAIN_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Slurm SPANK plugin and bootstrap tools for distributed training")
set(CPACK_PACKAGE_DESCRIPTION
"srun --distributed-train gives every task of a Slurm job step its rank, world size,
ordered endpoints and master address in the names of PyTorch, PaddlePaddle, TensorFlow and
dtrain, and binds it to its GPUs, NICs and CPU cores. The package holds the SPANK plugin,
a plugstack.conf.d drop-in that is disabled until edited, the tools dtrain-plan,
dtrain-check, dtrain-bench, dtrain-trainer, dtrain-plot, dtrain-mpi-allreduce-baseline and
dtrain-compare-allreduce, man pages, sbatch templates and site configuration examples.
It is built for exactly one Slurm release.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${DTRAIN_PACKAGE_PREFIX})
# Debug information would make the package four times larger.
set(CPACK_STRIP_FILES ON)
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/packaging/CPackProjectConfig.cmake)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DTRAIN_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${DTRAIN_SLURM_DEPENDENCY}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libdtrain_bootstrap is part of this package; dpkg-shlibdeps finds it in the build tree.
get_target_property(_dtrain_bootstrap_dir dtrain_bootstrap BINARY_DIR)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_dtrain_bootstrap_dir})
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/packaging/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Both packages' release names the Slurm release, in the file name, in `dpkg -l` and in `rpm -q`:
# dtrain_0.1.0-1.slurm22.05.8_amd64.deb, dtrain-0.1.0-1.slurm22.05.8.x86_64.rpm.
set(DTRAIN_PACKAGE_RELEASE "1.slurm${DTRAIN_SLURM_RELEASE}")
set(CPACK_DEBIAN_PACKAGE_RELEASE "${DTRAIN_PACKAGE_RELEASE}")
set(CPACK_RPM_PACKAGE_RELEASE "${DTRAIN_PACKAGE_RELEASE}")
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_LICENSE "${DTRAIN_PACKAGE_LICENSE}")
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Base")
set(CPACK_RPM_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(CPACK_RPM_PACKAGE_REQUIRES "${DTRAIN_RPM_SLURM_DEPENDENCY}")
# The drop-in names the plugin's path: `rpm --prefix` must not move it (cpack's default would).
set(CPACK_PACKAGE_RELOCATABLE OFF)
set(CPACK_RPM_USER_FILELIST "%config(noreplace) ${DTRAIN_PLUGSTACK_DROPIN_DIR}/dtrain.conf")
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION ${_dtrain_rpm_shared_dirs})
set(CPACK_RPM_CHANGELOG_FILE ${PROJECT_BINARY_DIR}/packaging/rpm/changelog)
# cpack has stripped the programs and compressed the man pages already; rpmbuild's own pass
# (strip, compress, build-id links under /usr/lib/.build-id) would make the RPM's files differ
# from the DEB's.
set(CPACK_RPM_SPEC_INSTALL_POST /bin/true)
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_BINARY_DIR}/packaging/rpm/pre_build.cmake)
include(CPack)
