//! Classroom mode's routes ([`crate::classroom`]): the join link that
//! seats a student, the teacher's page (the link, its QR code, the board
//! of seats), and who a request of step mode is: the teacher (the admin
//! token) or a seat (its signed cookie).

use askama::Template;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use super::Dashboard;
use crate::classroom::{self, Admission, JoinError, Seat, SeatRow, seal};
use crate::web::AppError;

/// Who is asking.
pub(super) enum Actor {
    /// The admin token: everything.
    Teacher,
    /// A seat: its own runs only.
    Seat(Seat),
}

impl Dashboard {
    /// The teacher (the admin token) or a seat (its cookie, counted
    /// against its rate); 401 for neither, 429 for a seat past its rate.
    pub(super) async fn actor(&self, headers: &HeaderMap) -> Result<Actor, AppError> {
        if self.authorize(headers).is_ok() {
            return Ok(Actor::Teacher);
        }
        let Some(id) = self.seat_id(headers) else {
            return Err(AppError::Unauthorized);
        };
        match classroom::admit(self.store(), &id).await? {
            Admission::Seat(seat) => Ok(Actor::Seat(seat)),
            Admission::RateLimited => Err(AppError::RateLimited(format!(
                "a seat may send {} requests a second",
                classroom::SEAT_RATE
            ))),
            Admission::Unknown => Err(AppError::Unauthorized),
        }
    }

    /// The seat a request's cookie names, if its signature holds.
    fn seat_id(&self, headers: &HeaderMap) -> Option<String> {
        seal::open(self.admin_token(), seal::from_headers(headers)?)
    }

    /// The seat a page is shown to, if any (nothing counted).
    pub(super) async fn seat_of(&self, headers: &HeaderMap) -> Option<Seat> {
        let id = self.seat_id(headers)?;
        classroom::seat(self.store(), &id).await.ok().flatten()
    }
}

/// `GET /join?name=N`: a seat for whoever follows the link.
#[derive(Debug, Default, Deserialize)]
pub(super) struct JoinQuery {
    name: Option<String>,
}

/// `GET /join`: a seat (or the one the browser has), its cookie set, and
/// on to step mode; 403 while the classroom is closed.
pub(super) async fn join(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    Query(query): Query<JoinQuery>,
) -> Result<Response, AppError> {
    let step = "/step?variant=none&scenario=race";
    if let Some(seat) = state.seat_of(&headers).await
        && classroom::is_open(state.store()).await?
    {
        tracing::debug!(seat = seat.id, "a seat came back");
        return Ok(Redirect::to(step).into_response());
    }
    let seat = match classroom::join(state.store(), query.name.as_deref()).await {
        Ok(seat) => seat,
        Err(JoinError::Store(err)) => return Err(err.into()),
        Err(err) => return Err(AppError::Forbidden(err.to_string())),
    };
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}",
        seal::COOKIE,
        seal::seal(state.admin_token(), &seat.id),
        classroom::SEAT_IDLE.as_secs()
    );
    let mut response = Redirect::to(step).into_response();
    let value = HeaderValue::from_str(&cookie)
        .map_err(|err| AppError::Internal(format!("seat cookie: {err}")))?;
    response.headers_mut().insert(header::SET_COOKIE, value);
    Ok(response)
}

#[derive(Template)]
#[template(path = "classroom.html")]
struct ClassroomPage {
    instance: String,
    join_url: String,
    /// The join link as a QR code (SVG).
    qr: String,
}

/// `GET /classroom`: the teacher's page.
pub(super) async fn page(State(state): State<Dashboard>) -> Result<Html<String>, AppError> {
    let join_url = format!("{}/join", state.public_url());
    let qr = qrcode::QrCode::new(join_url.as_bytes())
        .map_err(|err| AppError::Internal(format!("QR code: {err}")))?
        .render::<qrcode::render::svg::Color<'_>>()
        .min_dimensions(200, 200)
        .dark_color(qrcode::render::svg::Color("#000000"))
        .light_color(qrcode::render::svg::Color("#ffffff"))
        .build();
    ClassroomPage {
        instance: state.instance().to_owned(),
        join_url,
        qr,
    }
    .render()
    .map(Html)
    .map_err(|err| AppError::Internal(format!("template: {err}")))
}

/// `GET /api/admin/classroom`: whether it is open, and its seats.
#[derive(Debug, Serialize)]
pub(super) struct Board {
    open: bool,
    join_url: String,
    seats: Vec<SeatRow>,
}

pub(super) async fn board(
    State(state): State<Dashboard>,
    headers: HeaderMap,
) -> Result<Json<Board>, AppError> {
    state.authorize(&headers)?;
    Ok(Json(Board {
        open: classroom::is_open(state.store()).await?,
        join_url: format!("{}/join", state.public_url()),
        seats: classroom::board(state.store()).await?,
    }))
}

/// `POST /api/admin/classroom` `{"open": true}`: opens or closes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Switch {
    open: bool,
}

pub(super) async fn switch(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<Switch>, JsonRejection>,
) -> Result<(StatusCode, Json<Board>), AppError> {
    state.authorize(&headers)?;
    let Json(switch) = body?;
    if switch.open && !state.0.parts.chaos {
        return Err(AppError::Forbidden(
            "a classroom steps through races, which needs chaos mode (stocklock up, without --no-chaos)"
                .to_owned(),
        ));
    }
    classroom::set_open(state.store(), switch.open).await?;
    let Json(board) = board(State(state), headers).await?;
    Ok((StatusCode::OK, Json(board)))
}
