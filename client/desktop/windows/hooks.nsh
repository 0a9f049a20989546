; NSIS installer hooks (tauri.conf.json → bundle.windows.nsis.installerHooks).
; Nimbus Drive mounts through WinFsp: warn before installing when it is missing, since the app
; would install but could not mount. Not exercised on the Linux CI (see docs/DESKTOP.md).
!macro NSIS_HOOK_PREINSTALL
  ReadRegStr $0 HKLM "SOFTWARE\WOW6432Node\WinFsp" "InstallDir"
  ${If} $0 == ""
    ReadRegStr $0 HKLM "SOFTWARE\WinFsp" "InstallDir"
  ${EndIf}
  ${If} $0 == ""
    MessageBox MB_OKCANCEL|MB_ICONEXCLAMATION "Nimbus Drive needs WinFsp to show your space as a drive.$\r$\nInstall WinFsp from https://winfsp.dev first (you can also install it later).$\r$\n$\r$\nContinue installing Nimbus Drive?" IDOK +2
    Abort
  ${EndIf}
!macroend
