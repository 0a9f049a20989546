//! Nimbus Drive: the Tauri v2 shell. Everything it does is in `nimbus-desktop-core`; this file
//! only maps commands and events onto it, and adds the tray icon, single-instance and
//! start-at-login.
//!
//! Commands (names in `api::CommandName`, called from ui/src/backend.ts) take one `req`
//! argument where they have one and answer `Result<T, CommandError>`; status changes go to the
//! window as `api::DesktopEvent` on `api::EVENT_NAME`.

// No console window behind the app on Windows release builds.
#![cfg_attr(all(not(debug_assertions), target_os = "windows"), windows_subsystem = "windows")]

use anyhow::Context;
use nimbus_desktop_core::api::{
    CommandError, DesktopEvent, EVENT_NAME, MountRequest, MountState, ResolveReply, ResolveRequest, SignInOutcome,
    SignInRequest, SignOutOutcome, SignOutRequest, SsoSignInRequest, Status,
};
use nimbus_desktop_core::{Desktop, DesktopConfig};
use tauri::menu::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::{MouseButton, MouseButtonState, TrayIconBuilder, TrayIconEvent};
use tauri::{AppHandle, Emitter, Manager, State, Wry};
use tauri_plugin_autostart::{MacosLauncher, ManagerExt};

type Answer<T> = Result<T, CommandError>;

#[tauri::command]
async fn get_status(d: State<'_, Desktop>) -> Answer<Status> {
    Ok(d.status().await)
}

#[tauri::command]
async fn sign_in(d: State<'_, Desktop>, req: SignInRequest) -> Answer<SignInOutcome> {
    d.sign_in(req).await.map_err(Into::into)
}

/// The system browser signs in at the server's identity provider and comes back to a loopback
/// address this command listens on (nimbus_client::sso, shared with `nimbus login --sso`).
#[tauri::command]
async fn sign_in_sso(d: State<'_, Desktop>, req: SsoSignInRequest) -> Answer<SignInOutcome> {
    d.sign_in_sso(req, nimbus_desktop_core::open_browser).await.map_err(Into::into)
}

#[tauri::command]
async fn sign_out(d: State<'_, Desktop>, req: SignOutRequest) -> Answer<SignOutOutcome> {
    d.sign_out(req).await.map_err(Into::into)
}

#[tauri::command]
async fn mount(d: State<'_, Desktop>, req: MountRequest) -> Answer<MountState> {
    d.mount(req).await.map_err(Into::into)
}

#[tauri::command]
async fn unmount(d: State<'_, Desktop>) -> Answer<MountState> {
    d.unmount().await.map_err(Into::into)
}

#[tauri::command]
async fn retry_uploads(d: State<'_, Desktop>) -> Answer<u32> {
    d.retry_uploads().await.map_err(Into::into)
}

#[tauri::command]
async fn resolve_problem(d: State<'_, Desktop>, req: ResolveRequest) -> Answer<ResolveReply> {
    d.resolve_problem(req).await.map_err(Into::into)
}

#[tauri::command]
async fn free_cache(d: State<'_, Desktop>) -> Answer<()> {
    d.free_cache().await.map_err(Into::into)
}

#[tauri::command]
async fn open_in_file_manager(d: State<'_, Desktop>) -> Answer<()> {
    d.open_in_file_manager().await.map_err(Into::into)
}

/// The tray menu's items whose text follows the status.
struct Tray {
    status: MenuItem<Wry>,
    mount: MenuItem<Wry>,
    open: MenuItem<Wry>,
}

fn show_main(app: &AppHandle) {
    if let Some(w) = app.get_webview_window("main") {
        let _ = w.show();
        let _ = w.unminimize();
        let _ = w.set_focus();
    }
}

fn status_line(s: &Status) -> String {
    let Some(a) = &s.account else { return "Signed out".into() };
    let conn = match s.connectivity {
        nimbus_desktop_core::api::Connectivity::Online => "online",
        _ => "offline",
    };
    let drive = if s.mount.mounted { "mounted" } else { "not mounted" };
    let pending = match s.activity.pending_uploads {
        0 => String::new(),
        n => format!(", {n} to upload"),
    };
    format!("{} — {conn}, {drive}{pending}", a.username)
}

fn update_tray(app: &AppHandle, s: &Status) {
    let Some(tray) = app.try_state::<Tray>() else { return };
    let line = status_line(s);
    let _ = tray.status.set_text(&line);
    let _ = tray.mount.set_text(if s.mount.mounted { "Unmount" } else { "Mount" });
    let _ = tray.mount.set_enabled(s.account.is_some());
    let _ = tray.open.set_enabled(s.mount.mounted);
    if let Some(icon) = app.tray_by_id("main") {
        let _ = icon.set_tooltip(Some(format!("Nimbus Drive: {line}")));
    }
}

fn build_tray(app: &AppHandle) -> tauri::Result<()> {
    let status = MenuItem::with_id(app, "status", "Signed out", false, None::<&str>)?;
    let show = MenuItem::with_id(app, "show", "Open Nimbus Drive", true, None::<&str>)?;
    let mount = MenuItem::with_id(app, "mount", "Mount", false, None::<&str>)?;
    let open = MenuItem::with_id(app, "open", "Open the drive folder", false, None::<&str>)?;
    let autostart_on = app.autolaunch().is_enabled().unwrap_or(false);
    let autostart = CheckMenuItem::with_id(app, "autostart", "Start at login", true, autostart_on, None::<&str>)?;
    let quit = MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?;
    let sep = PredefinedMenuItem::separator(app)?;
    let sep2 = PredefinedMenuItem::separator(app)?;
    let menu = Menu::with_items(app, &[&status, &sep, &show, &mount, &open, &autostart, &sep2, &quit])?;
    let mut builder =
        TrayIconBuilder::with_id("main").menu(&menu).tooltip("Nimbus Drive").show_menu_on_left_click(false);
    if let Some(icon) = app.default_window_icon() {
        builder = builder.icon(icon.clone());
    }
    builder
        .on_menu_event(move |app, event| match event.id().as_ref() {
            "show" => show_main(app),
            "mount" => {
                let app = app.clone();
                tauri::async_runtime::spawn(async move {
                    let d = app.state::<Desktop>().inner().clone();
                    let result = if d.status().await.mount.mounted {
                        d.unmount().await.map(|_| ())
                    } else {
                        d.mount(MountRequest::default()).await.map(|_| ())
                    };
                    if let Err(e) = result {
                        // The window shows `last_error`-style problems; from the tray, open it.
                        tracing::warn!(error = %e, "tray mount/unmount");
                        show_main(&app);
                    }
                });
            }
            "open" => {
                let app = app.clone();
                tauri::async_runtime::spawn(async move {
                    if let Err(e) = app.state::<Desktop>().open_in_file_manager().await {
                        tracing::warn!(error = %e, "open in file manager");
                    }
                });
            }
            "autostart" => {
                let al = app.autolaunch();
                let on = al.is_enabled().unwrap_or(false);
                let r = if on { al.disable() } else { al.enable() };
                if let Err(e) = r {
                    tracing::warn!(error = %e, "start at login");
                }
            }
            "quit" => {
                let app = app.clone();
                tauri::async_runtime::spawn(async move {
                    // Unmount first: pending writes are uploaded (or stay journaled), never lost.
                    app.state::<Desktop>().shutdown().await;
                    app.exit(0);
                });
            }
            _ => {}
        })
        .on_tray_icon_event(|tray, event| {
            if let TrayIconEvent::Click { button: MouseButton::Left, button_state: MouseButtonState::Up, .. } = event {
                show_main(tray.app_handle());
            }
        })
        .build(app)?;
    app.manage(Tray { status, mount, open });
    Ok(())
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NIMBUS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = DesktopConfig::platform_default().context("cannot find the app's directories")?;
    let desktop = tauri::async_runtime::block_on(Desktop::open(cfg)).context("cannot open the app's state")?;
    tracing::info!(store = ?desktop.token_store(), "token store");

    tauri::Builder::default()
        // Must be first: a second launch only brings the running app's window forward.
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| show_main(app)))
        .plugin(tauri_plugin_autostart::init(MacosLauncher::LaunchAgent, Some(vec!["--minimized"])))
        .manage(desktop.clone())
        .invoke_handler(tauri::generate_handler![
            get_status,
            sign_in,
            sign_in_sso,
            sign_out,
            mount,
            unmount,
            retry_uploads,
            resolve_problem,
            free_cache,
            open_in_file_manager
        ])
        .setup(move |app| {
            build_tray(app.handle())?;
            if std::env::args().any(|a| a == "--minimized")
                && let Some(w) = app.get_webview_window("main")
            {
                let _ = w.hide();
            }
            let handle = app.handle().clone();
            let mut events = desktop.subscribe();
            tauri::async_runtime::spawn(async move {
                loop {
                    match events.recv().await {
                        Ok(e) => {
                            let DesktopEvent::StatusChanged { status } = &e;
                            update_tray(&handle, status);
                            if let Err(err) = handle.emit(EVENT_NAME, &e) {
                                tracing::warn!(error = %err, "cannot send an event to the window");
                            }
                        }
                        // Fell behind: the next event carries the whole status anyway.
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    }
                }
            });
            tauri::async_runtime::spawn(desktop.clone().run_status_loop());
            Ok(())
        })
        .on_window_event(|window, event| {
            // Closing the window keeps the app (and the drive) running in the tray.
            if let tauri::WindowEvent::CloseRequested { api, .. } = event {
                api.prevent_close();
                let _ = window.hide();
            }
        })
        .run(tauri::generate_context!())
        .context("the app stopped with an error")?;
    Ok(())
}
